"""The content domain of a request, read from its prompt text the way a person would.

`classify_domain` is a small deterministic scorer: each domain collects weighted evidence from the ask (the opening
paragraph and closing lines, where people say what they want, counted where they read as a request) and, capped so
that a pasted document or file cannot outvote the ask, from the material (a sample of the whole text: code syntax,
SQL keywords, vocabulary). The highest score wins; chat holds a fixed baseline. Regular expressions run on the short
ask (lower-cased, unless a pattern has re.I or needs case), and only when a cheap word test says they could match.
"""

import re

DOMAINS = ("chat", "code", "sql", "summarize", "structured")

# The most of a text ever read (first and last characters), the size of each end, the material sample.
_HEAD, _TAIL, _ASK, _SAMPLE_HEAD, _SAMPLE_TAIL = 6000, 1500, 320, 1000, 300
_CHAT_BASELINE, _MATERIAL_CAP, _WORD_CAP, _MATERIAL_WEIGHT = 2.0, 3.5, 3.5, 0.35
_Vocab = tuple[dict[str, float], frozenset[str]]
# Language names: no plurals ("ball pythons" are snakes), and several in one ask ("Rust or Go?") count as one.
_NAMES = frozenset("python java javascript typescript kotlin swift ruby rust php perl scala golang".split())


def _vocab(*groups: tuple[float, str]) -> _Vocab:
    """Word -> weight (plurals too, except of _NAMES: "goroutine" counts "goroutines"), and the words as a set."""
    table = {w + "s": x for x, words in groups for w in words.split() if w[-1] not in "s+#" and w not in _NAMES}
    table |= {w: weight for weight, words in groups for w in words.split()}
    return table, frozenset(table)


def _phrases(*groups: tuple[float, str]) -> dict[str, float]:
    return {p: weight for weight, phrases in groups for p in phrases.split("|")}


def _alt(words: str) -> str:  # a regular-expression group matching any of `words`
    return "(?:" + "|".join(words.split()) + ")"


# Words and phrases that point at a domain, with their weight in the ask (words in the material: x0.35).
_CODE_WORDS = _vocab(
    (3.0, "segfault segmentation sfinae constexpr nullptr vtable linker macro_rules subscriptable nonetype traceback "
          "stacktrace typeerror valueerror keyerror attributeerror syntaxerror referenceerror nullpointerexception "
          "useeffect usestate goroutine coroutine dereference polymorphism variadic panicked println printf malloc "
          "stdin stdout codebase unique_ptr shared_ptr elision pygame c++ #include"),
    (2.5, "div css html flexbox jquery dom"),
    (2.0, "python javascript typescript kotlin golang haskell php scala perl lua elixir ocaml clojure erlang dart "
          "julia fortran matlab nodejs django flask numpy asyncio aiohttp ggplot ggplot2 dplyr dataframe matplotlib "
          "assembly disassembly x86 pytest junit jsx webpack tokio serde powershell compiler compile compiling "
          "compiled struct enum hashmap regex regexp mutable immutable mutex refactor refactoring debug debugging "
          "callback closures constructor destructor raii namespace unwrap impl fn vec std inheritance decorator "
          "lambda generics iterator async await snippet mut idiomatic profiler oop usize typename elif derive"),
    (1.5, "java swift ruby bash zsh js ts rs py cpp panic react pandas npm pip cargo crate c#"),
    (1.2, "rust function method trait macro generic closure pointer lifetimes variable syntax recursion dict "
          "implement code script program def const bug loop borrowed iterate iterating runtime operator parameter "
          "endpoint frontend interface deadlock thread overflow heap indentation shell keyword pub recursively"),
    (0.6, "exception class classes array string vector algorithm lifetime template module library api null undefined "
          "implementation return import integer boolean test unit stack memory borrow ownership programming binary "
          "node catch server leaks deploy self let void"),
)
_SQL_WORDS = _vocab(
    (3.0, "sql mysql postgres postgresql sqlite psql tsql plsql mssql bigquery mariadb subquery subqueries cte upsert "
          "timescaledb hypertable redshift keyset dense_rank row_number"),
    (1.6, "query queries join joining denormalized denormalize snowflake indexes clustered dbt nvl coalesce"),
    (1.2, "database db pagination"),
    (0.8, "table column row index indexed schema normalize normalized pivot partition aggregate oracle seq salary "
          "employees dialect procedure nulls normalization 1nf 2nf 3nf"),
)
_CHAT_WORDS = _vocab(
    (1.0, "email letter poem haiku limerick story toast recipe advice tips trip travel itinerary wedding birthday "
          "friend partner feel landlord boss proofread joke tweet note funny recommend book novel movie business "
          "history career market salary hiring learn pet reptile animal"))
_CREATIVE = frozenset("poem poems haiku limerick sonnet song lyrics joke jokes story stories toast rap".split())
_CHAT_PHRASES = _phrases((1.0, "tell me about|who created|who invented|history of|is it worth|good career"))
_CODE_PHRASES = _phrases(
    (3.0, "borrow checker|undefined reference|error[e"), (2.5, "regular expression|stack trace"),
    (2.0, "move out of|'static|linked list|compile error|race condition|data race|memory leak"),
    (1.5, "hello world|pull request|unit test|type error|context manager|try/"), (1.0, "one-liner|bad practice"))
_SQL_PHRASES = _phrases(
    (3.0, "create an index|add an index|window function|sql server|write a query|isolation level|"
          "phantom read|covering index"), (2.5, "stored procedure|query plan|seq scan"),
    (2.0, "running total|running balance|primary key|foreign key|group by|inner join|left join"),
    (1.5, "per group|many-to-many"), (1.0, "order by"), (0.8, "count the number of"),
    (0.6, "signed up|users who|per month|per day|each day|per week"), (0.5, "ordered by"))
_SQL_UPPER = ("SELECT ", "FROM ", "WHERE ", "JOIN ", "GROUP BY", "ORDER BY", " AS ", "CREATE TABLE", "INSERT ",
              "HAVING", "UPDATE ", "SUM(", "COUNT(", "OVER (", "ALTER TABLE", "PRIMARY KEY", "UNION", " NULL",
              "DELETE", "TRUNCATE", "MERGE ", "VARCHAR")
_SQL_MATERIAL, _SQL_LOWER = _SQL_UPPER[:9], ("group by", "order by", " join ", "select ", "\n-- ")  # ask: all
_PUNCT = bytes.maketrans(b"!\"$%&'()*,./:;<=>?@[\\]^`{|}~-", b" " * 29)  # keeps _ + # for c++, c#
_FENCE_TAGS = {"sql": "sql", **dict.fromkeys("json yaml yml csv xml toml".split(), "structured"),
               **dict.fromkeys("text txt markdown md".split(), "chat")}
_FENCE = re.compile(r"```[ \t]*([A-Za-z+#]*)")
_INLINE_CODE = re.compile(r"`[^`\n]{1,40}`")
_GENERIC = re.compile(r"<[A-Z&'_][\w&', <>]{0,30}>")  # Vec<T>, Box<dyn Trait>, &'a
_CALL = re.compile(r"\((?<=\w\()[\w\"' ,.]*\)")  # foo(bar), len(xs)
_DECL = re.compile(r"(?:let|const|def|fn|var|val|local)(?: \w+){1,3}\s*[:=(<]")  # let x =, let f x y =, def f(
# Is this end a request? A question, an imperative or "can you", or a line ending in ':'; not a quotation.
_PREAMBLE = re.compile(r"(?:system:|\[system\]|<<sys>>|you are (?:a|an) )", re.I)
_SENTENCE_START = re.compile(r"[.!?:\]\n] ?([a-z']+)[ ,]*([a-z']*)")
_OPENERS = frozenset(
    "write give make create explain summarize summarise sumarize return output convert find list show fix review tell "
    "generate extract translate draft describe recommend suggest rewrite refactor implement calculate get design add "
    "remove port optimize optimise parse classify tag map fill produce respond reply answer use turn condense shorten "
    "recap boil pull provide tldr tl key help what how why please pls plz read detect identify compare".split())
_REQUEST_PAIRS = (frozenset("can could would will i".split()), frozenset("you u need want would i'd d".split()))
# A summary ask is strong when it points at given text (this, below, the article...), stands bare
# ("TL;DR:", "summarize pls") or follows a document; "summarise the arguments for X" is chat.
_SUMMARY_GATE = ("summ", "sumar", "sumer", "tl", "gist", "recap", "conden", "boil", "synops", "nutshell", "short",
                 "point", "takeaway", "finding", "idea", "argument", "message", "digest", "cliff", "say", "abridg")
_SUMMARY = re.compile(
    r"\b(?:summ?[ae]r(?:y|ies|i[sz]e[sd]?|i[sz]ing|i[sz]ation)|tl\s?;?\s?dr|gist|recap|condense|synopsis|"
    r"boil\s+(?:\w+\s+)?down|summ?\s+(?:\w+\s+)?up|nutshell|in\s+short|short\s+summary|short\s+version|"
    r"what\s+(?:does|do)\s+(?:it|this|they|the\s+\w+)\s+say|takeaways?|cliff'?s?\s?notes|shorten|shorter|abridge|"
    r"(?:key|main|important)\s+(?:points?|takeaways?|findings|ideas?|arguments?|messages?)|digest)\b")
# With a prose document given, its overview, highlights, abstract... is a summary; "an overview of X" alone is chat.
_GIST = re.compile(r"\b(?:overview|highlights|pros\s+and\s+cons|(?:key|main)\s+contributions|abstract|logline|"
                   r"(?:an?|executive)\s+brief(?=\s*(?:\(|of\b|for\b|:|$))|r[eé]sum[eé]\s+of|what\s+happened|what(?:'s|\s+is)\s+"
                   r"(?:it|this|the\s+\w+)\s+(?:\w+\s+)?(?:about|asking|saying))\b")  # not "a brief reply"
_DOC_NOUNS = ("article text document doc passage email thread transcript report paper post notes minutes chapter "
              "essay memo conversation discussion meeting page letter speech lecture interview reviews? content "
              "piece blog changelog release postmortem proposal study story survey results excerpt")
_DOC_REF = re.compile(r"\b(?:this|these|that|those|it|them|the\s+following|following|below|above|attached|"
                      rf"here'?s?|here\s+(?:is|are)|(?:the|(?:my|our)(?:\s+[\w-]+)?)\s+{_alt(_DOC_NOUNS)})\b")
_INTRO = re.compile(r"\b(?:here'?s|here\s+(?:is|are)|below\s+(?:is|are)|the\s+following|attached|i\s+pasted|"
                    r"pasted\s+(?:below|above))\b")
_END = re.compile(r"[.?!:\n]")
_TOPIC = re.compile(r"\s*(?:of|about|on)\s+\w")
# Structured: a format asked for (not "a function that returns JSON", nor JSON.parse), or fields.
_FMT_WORDS = frozenset("json jsonl ndjson yaml yml csv tsv xml toml fill populate complete".split())
_FMT_HIT = re.compile(r"(?:ndjson|jsonl?|yaml|yml|csv|tsv|xml|toml)\b")  # run on the lower-cased ask
_FMT_VERBS = frozenset("as in into to return returns output respond reply answer format formatted give produce "
                       "emit generate only valid provide write make create".split())  # "as JSON", "return a JSON"
_FMT_FILLERS = frozenset("a an me the some one pure plain strict single it them back only with".split())
_FMT_ASKERS = frozenset("generate give produce create make output return list show print format".split())
_FMT_AFTER = re.compile(r"\s+(?:object|objects|obj|array|list|format|output|only|schema|response|record|records|"
                        r"lines?|file|document|config|dict|feed)\b|\s*:\s*(?:\n|$)")
_FMT_IO = re.compile(r"\b(?:(?:ex|im)port|sav|load|read|pars|(?:up|down)load)\w*(?: .*(?:to|from))? (?:an? )?$")
_FILL = re.compile(r"\b(?:fill|populate|complete)\s+(?:in\s+|out\s+)?(?:this|the|these|following|my)\s+"
                   r"(?:\w+\s+)?(?:schema|template|form|fields)\b")
_CODE_OBJECT = re.compile(  # "a function that returns JSON" describes code, not the answer's shape
    r"\b(?:function|method|script|program|endpoint|api|class|handler|server|route|service|app|cli|code)s?\b"
    r"(?!\s+call)(?:\s+[\w-]+){0,3}?\s+(?:that|which|to|returning|returns?|should|outputs?|emits?|producing|"
    r"reads?|parses?|writes?)\b[^.?!\n]*$")
_FIELD_PHRASES = tuple("function call|function-call|tool call|tool-call|the arguments|structured data|structured "
                       "output|structured format|machine-readable|machine readable|this format|following format|"
                       "exact format|key: value|key-value|key/value|key=value".split("|"))
_FIELD_WORDS = frozenset("keys fields field properties attributes".split())
_FIELDS = re.compile(r"\b(?:with|using|into|onto|has|have)\s+(?:the\s+)?(?:keys|fields|properties|attributes)\b|"
                     r"\binto\b[^.\n]{0,60}\bfields\b|\bfields?\s+\w+(?:,\s*\w+)+")
_SHAPES = re.compile(r"\{\s*\w+\s*,\s*\w+[^{}\n]{0,40}\}|:[ \t]*<\w[^>\n]*>[ \t]*$", re.M)  # {a, b}; Name: <x>
# Code: a verb with a program object ("write a function"), "won't compile", or "in C".
_CODE_VERB_LIST = ("write implement fix debug refactor review optimize optimise port rewrite convert translate "
                   "explain compile test generate create build make code")
_CODE_OBJECT_LIST = ("function method class program code snippet loop macro test regex algorithm struct trait "
                     "module component handler decorator lambda closure endpoint route one-liner cli parser")
_CODE_VERBS = frozenset(_CODE_VERB_LIST.split())
_CODE_OBJECTS = frozenset(_CODE_OBJECT_LIST.split() + [w + "s" for w in _CODE_OBJECT_LIST.split()] + ["regular"])
_CODE_ASK = re.compile(rf"\b{_alt(_CODE_VERB_LIST)}\b[^.?\n]{{0,40}}\b(?:{_alt(_CODE_OBJECT_LIST)}|"
                       r"regular\s+expression)s?\b")
_CODE_ASK2 = re.compile(r"won'?t\s+(?:this\s+|it\s+|my\s+\w+\s+)?compile\b|[Ii]n (?:C\+\+|C#|C|Go|R)(?![\w+#])")
_SQL_GATE = frozenset("select join group create insert alter delete partition over having union".split())
_SQL_MARK = re.compile(
    r"\bselect\s+(?:\*|distinct\b|top\s+\d|count\s*\(|[\w.]+\s*(?:,|\bfrom\b|\bas\b))|\bgroup\s+by\b|\border\s+by\b|"
    r"\bfrom\s+\w+(?:\s+\w+)?\s+(?:where|join|left|inner|group|order|limit)\b|\bpartition\s+by\b|\bover\s*\(|"
    r"\b(?:left|right|inner|outer|cross|full)\s+(?:outer\s+)?join\b|\bcreate\s+(?:table|index|view)\b|"
    r"\binsert\s+into\b|\balter\s+table\b|\bdelete\s+from\b|\bhaving\s+\w|\bwith\s+\w+\s+as\s*\(|\bunion\s+all\b|"
    r"\bwhere\s+[\w.]+\s*(?:[=<>]|is\b|in\s*\(|like\b|between\b)")
_NOT_DB_TABLES = "kitchen dining periodic coffee round picnic pool water times side end the a an operating negotiating"
_TABLE_REF = re.compile(  # "the employees table", "Tables: ...", but not "the kitchen table"
    rf"\b(?:from|in|on|into|join|the|a|an|each|my|our|both)\s+(?!{_alt(_NOT_DB_TABLES)}\b)[a-z_]+\s+tables?\b|"
    r"\btables?\s*:|\btables?\s+(?:of|called|named)\s+\w+")


def _ends(text: str) -> tuple[str, str, int]:
    """The opening paragraph (or line, if it ends with ':'), the closing line(s) of the rest, and how
    many characters lie between them: where people state their ask. A system prompt is skipped."""
    if _PREAMBLE.match(text) and (cut := text.find("\n\n", 0, 600)) > 0:
        text = text[cut:].lstrip()
    head, line = text[:_ASK], text.find("\n", 0, _ASK)
    cut = line if line > 0 and head[:line].rstrip().endswith(":") else head.find("\n\n")
    head = head[:cut] if cut > 0 else head
    head = head[:fence] if (fence := head.find("```", 10)) > 0 else head  # a fenced block is material
    rest = text[len(head):]
    tail = rest[-_ASK:]
    tail = tail[fence + 3:] if (fence := tail.rfind("```")) >= 0 else tail  # ends in code: no closing ask
    cut = tail.rfind("\n")
    if 0 <= cut and len(tail) - cut < 15:  # a short last line ("TL;DR?") takes a short line before along
        before = tail.rfind("\n", 0, cut - 1)
        cut = before if cut - before < 120 and before >= 0 else cut
    tail = tail[cut:] if cut >= 0 else tail
    return "\n" + head, tail, len(rest) - len(tail)  # "\n": the head starts a sentence


def _is_request(part: str) -> bool:
    firsts, seconds, q = *_REQUEST_PAIRS, part.strip()
    return not (q[:1] in "\"“" and q[-1:] in "\"”") and ("?" in part or q.endswith(":") or any(
        a in _OPENERS or (a in firsts and b in seconds) for a, b in _SENTENCE_START.findall(part.lower())))


def _words(s: str) -> list[str]:  # bytes.translate stays fast on non-ASCII text; str.translate does not
    return s.encode(errors="surrogatepass").translate(_PUNCT).decode(errors="surrogatepass").split()


def _weigh(vocab: _Vocab, words: set[str], phrases: dict[str, float] | None = None, low: str = "") -> float:
    """The weights of `words` in `vocab`, plus those of `phrases` found in `low`."""
    return sum(vocab[0][w] for w in words & vocab[1]) + sum(w for p, w in (phrases or {}).items() if p in low)


def _code_syntax(s: str) -> int:
    """Code-like tokens in `s`: braces, semicolons, ::, ->, =>, ==, indentation, generics, calls."""
    return (s.count("{") + s.count(";") + 2 * (s.count("::") + s.count("->") + s.count("=>")) + s.count("==")
            + 2 * (s.count("\n    ") + s.count("\n\t") + len(_GENERIC.findall(s))) + len(_CALL.findall(s)))


def _summary_ask(ask: str, after_doc: bool) -> float:
    """2: a summary of given text is asked for; 1: the word is used casually; 0: no summary (`ask` lower-cased)."""
    best = 0.0
    for m in _SUMMARY.finditer(ask):
        end = _END.search(ask, m.end())
        start = max(ask.rfind(".", 0, m.start()), ask.rfind("\n", 0, m.start()))
        rest = ask[m.end():end.start() if end else len(ask)]
        bare = len(rest.strip(" ,-*")) <= 25 and not _TOPIC.match(rest)  # not "a summary of what X is"
        if after_doc or bare or _DOC_REF.search(rest) or _DOC_REF.search(ask, start + 1, m.start()):
            return 2.0
        best = 1.0
    return 2.0 if best and _INTRO.search(ask) else best


def _format_asks(ask: str) -> int:
    """How many times `ask` (lower-cased) asks for a machine-readable format."""
    n = 0
    for m in _FMT_HIT.finditer(ask):
        start, end, nxt, prev = m.start(), m.end(), ask[m.end():m.end() + 2], ask[m.start() - 1:m.start()]
        if prev.isalnum() or prev in ("_", ".") or nxt[:1] == "(" or (nxt[:1] == "." and nxt[1:].isalnum()):
            continue
        sentence = ask[max(0, start - 120, *(ask.rfind(c, 0, start) + 1 for c in (". ", "? ", "! ", "\n"))):start]
        verb = next((w for w in reversed(_words(sentence)[-4:]) if w not in _FMT_FILLERS), "")
        asked = verb in _FMT_VERBS or bool(_FMT_ASKERS.intersection(sentence[-41:].split()))
        moved = ask.startswith(" file", end) and _FMT_IO.search(sentence)  # "export it to a CSV file"
        if (asked or _FMT_AFTER.match(ask, end)) and not (moved or _CODE_OBJECT.search(ask, max(0, start - 50), start)):
            n += 1
    return n


def _material(text: str) -> dict[str, float]:
    """Capped evidence from a sample of the whole text (code syntax, SQL keywords, words, fences); is it prose?"""
    sample = text if len(text) <= _SAMPLE_HEAD + _SAMPLE_TAIL else text[:_SAMPLE_HEAD] + text[-_SAMPLE_TAIL:]
    low = sample.lower()
    words = set(_words(low))
    syntax = _code_syntax(sample)
    code = min(3.0, 60.0 * syntax / len(sample)) if syntax >= 3 else 0.0
    code += min(1.0, 0.2 * sample.count("_")) + _MATERIAL_WEIGHT * _weigh(_CODE_WORDS, words)
    sql_kw = sum(map(sample.count, _SQL_MATERIAL)) + sum(map(low.count, _SQL_LOWER))
    sql = min(4.0, 0.7 * sql_kw) + _MATERIAL_WEIGHT * _weigh(_SQL_WORDS, words)
    fences = [_FENCE_TAGS.get(tag.lower(), "code") for tag in _FENCE.findall(sample)]
    code, sql = code + 1.5 * fences.count("code"), sql + 1.5 * fences.count("sql")
    return {"code": min(_MATERIAL_CAP, max(0.0, code - 0.4 * min(sql_kw, 8))), "sql": min(_MATERIAL_CAP, sql),
            "structured": min(2.0, 0.5 * sample.count('":')), "prose": syntax < 3 and sql_kw < 2 and not fences}


def scores(text: str) -> dict[str, float]:
    """Each domain's score for `text` (the largest wins); exposed for debugging and tests."""
    text = text.strip()
    text = text if len(text) <= _HEAD + _TAIL else text[:_HEAD] + "\n" + text[-_TAIL:]
    head, tail, between = _ends(text)
    if len(text) <= 80 and "```" not in text:
        parts = [("\n" + text, False)]
    else:   # whichever of the two ends reads as a request (both, if neither does)
        parts = [(p, after) for p, after in ((head, False), (tail, True)) if p.strip() and _is_request(p)]
        parts = parts or [(p, after) for p, after in ((head, False), (tail, True)) if p.strip()]
    ask = "\n".join(p for p, _ in parts)
    low, words = ask.lower(), set(_words(ask.lower()))
    fmt = (_format_asks(low) + bool(_FILL.search(low))) if words & _FMT_WORDS else 0  # asked more than once: surer
    fields = sum(map(low.__contains__, _FIELD_PHRASES)) + ("schema" in words)
    fields += len(_FIELDS.findall(low)) if words & _FIELD_WORDS else 0
    fields += len(_SHAPES.findall(ask)) if "{" in ask or "<" in ask else 0
    structured = (6.5 + min(fmt, 3) if fmt else 0.0) + min(5.0, 2.5 * fields) + ("extract" in low)
    code = min(_WORD_CAP, _weigh(_CODE_WORDS, words, _CODE_PHRASES, low) - 2 * max(0, len(words & _NAMES) - 1))
    code += min(3.0, 0.8 * (_code_syntax(ask) + 2 * len(_DECL.findall(ask))))
    code += min(1.6, 0.8 * len(_INLINE_CODE.findall(ask))) if "`" in ask else 0.0
    code += 2.0 * any(len(w) > 9 and w.endswith(("error", "exception")) for w in words)  # KeyError, ...
    # "Convert this class to JSON" puts its object into a format; it does not program it.
    asks = len(_CODE_ASK.findall(ask)) if words & _CODE_VERBS and words & _CODE_OBJECTS and not fmt else 0
    code += 2.5 * min(2, asks + len(_CODE_ASK2.findall(ask)))
    sql = min(_WORD_CAP, _weigh(_SQL_WORDS, words, _SQL_PHRASES, low))
    sql += min(4.0, 1.5 * sum(map(ask.__contains__, _SQL_UPPER)))
    sql += min(3.0, 1.0 * len(_SQL_MARK.findall(low))) if words & _SQL_GATE else 0.0
    sql += 2.5 if "table" in low and _TABLE_REF.search(low) else 0.0
    before_tail = between + (0 if parts[0][0] is head else len(head))  # document text before the tail
    summ = max(_summary_ask(p.lower(), after and before_tail >= 150) for p, after in parts) \
        if any(w.startswith(_SUMMARY_GATE) for w in words) or {"sum", "up"} <= words else 0.0
    material, given = _material(text), len(text) - len(ask)  # the length of the document given, if any
    summ = 2.0 if given >= 150 and material["prose"] and _GIST.search(low) else summ
    summarize = {0.0: 0.0, 1.0: 1.0, 2.0: 6.5 if given >= 100 else 4.0}[summ]
    chat = _CHAT_BASELINE + min(2.0, _weigh(_CHAT_WORDS, words, _CHAT_PHRASES, low)) + 3.0 * bool(words & _CREATIVE)
    return {"chat": chat, "code": code + material["code"], "sql": sql + material["sql"], "summarize": summarize,
            "structured": structured + material["structured"]}


def classify_domain(text: str) -> str:
    """The domain (one of DOMAINS) that the main ask of a request's text belongs to."""
    return max(DOMAINS, key=scores(text).__getitem__)  # ties go to the earlier domain: chat first


# ---- Subdomains: finer kinds of content within a domain, where acceptance differs ------------------------------------
# A math problem or a translation is chat to a person, and C, C++ or Rust is code, but speculation accepts differently
# on them (cluster/sim/acceptance.py gives each its profile and the published figure it comes from): MT-Bench's math
# questions and GSM8K, Spec-Bench's translation task, and a small draft model on Rust/C++ (the seed's 0.82x) against
# Python (HumanEval, the easiest dataset for a draft model in EAGLE-3's Table 1). The domain stays what a person would
# say; the subdomain refines it, so everything that reads domains (profile files, `loadtest calibrate`) keeps working.
SUBDOMAINS = ("chat", "math", "translation", "code", "systems-code", "sql", "summarize", "structured")
PARENT = {**{d: d for d in DOMAINS}, "math": "chat", "translation": "chat", "systems-code": "code"}

_KIND_HEAD = 1500   # the characters of a chat or code text that the refinement reads
_NUMBER = re.compile(r"(?<![\w.])\$?\d+(?:[.,]\d+)*%?")
# x^3, x+y = 4z, f(x) = ..., |x + 5| < 10: written maths
_EQUATION = re.compile(r"\^\s*\d|\b[a-z]\s*[-+*/]\s*\w+\s*[=<>]|\b[a-z]\(\w+\)\s*=|\|[^|\n]{1,15}\|\s*[<>=]")
_MATH_STRONG = frozenset(
    "probability remainder divisible integer integers inequality equation equations solve area perimeter triangle "
    "radius percent percentage average ratio fraction prime derivative integral dice calculate compute".split())
_MATH_WEAK = frozenset("total cost costs price priced profit half twice times combined sum each per altogether "
                       "remaining left".split())
_HOW_MUCH = re.compile(r"\bhow (?:many|much|long|far|old|big|high|fast|tall|heavy)\b")
_MATH_ASK = re.compile(r"\bhow (?:many|much|long|far|old|big|high|fast|tall|heavy)\b|\bwhat(?:'s| is| was| are| were| "
                       r"will be)(?: the| their| his| her)? (?:total|value|probability|area|sum|average|remainder|cost|"
                       r"price|number|percentage|percent|temperature|combined|difference|amount)|\b(?:find|calculate|"
                       r"compute|solve|express|determine)\b")
_LANGUAGES = ("english french german spanish italian portuguese chinese mandarin cantonese japanese korean russian "
              "arabic hindi dutch swedish norwegian danish finnish polish turkish greek hebrew latin vietnamese thai "
              "indonesian czech ukrainian romanian hungarian persian urdu bengali swahili")
_TRANSLATE = re.compile(rf"\btranslat(?:e|ed|es|ing|ion)\b[^\n]{{0,80}}\b(?:{_alt(_LANGUAGES)})\b|"
                        rf"\b(?:{_alt(_LANGUAGES)})\s+(?:to|into|->)\s+(?:{_alt(_LANGUAGES)})\b|"
                        rf"\bhow (?:do|would|can) (?:you|i) say\b[^\n]{{0,80}}\bin (?:{_alt(_LANGUAGES)})\b")
# C, C++ and Rust against the rest (Python, Java, JavaScript, Go...): fence tags, names, idioms
_SYSTEMS_TAGS, _OTHER_TAGS = frozenset("rust rs c cpp c++ cc cxx h hpp".split()), frozenset(
    "python py java javascript js typescript ts go golang kotlin swift ruby php scala csharp c# bash sh".split())
_SYSTEMS_NAME = re.compile(r"\b(?:rust|cpp)\b|\bc\+\+(?:\d\d)?(?![\w+])|\bin c\b|\bc (?:program|function|code)\b|"
                           r"\bborrow checker\b|\bstd::|\b(?:rustc|cargo|clang|g\+\+|gcc)\b", re.I)
_OTHER_NAME = re.compile(r"\b(?:python|java|javascript|typescript|golang|kotlin|swift|ruby|php|scala|c#)\b", re.I)
_SYSTEMS_MARKS = ("fn ", "&'", "let mut ", "impl ", "#include", "std::", "&mut ", "&str", "println!", "vec!", "usize",
                  "unsafe ", "template<", "template <", "int main", "printf(", "malloc(", "nullptr", "cout <<",
                  "Vec<", "Option<", "-> Self")
_OTHER_MARKS = ("def ", "import ", "self", "elif ", "print(", "None", "func ", "package ", "public ", "const ",
                "=> ", "function ", "console.", "System.out")


def _is_math(text: str) -> bool:
    """A maths problem: written maths, or numbers with a question about them ("how many...", "the total cost")."""
    if _EQUATION.search(text):
        return True
    low = text.lower()
    if not _MATH_ASK.search(low):
        return False
    numbers, words = len(_NUMBER.findall(text)), set(_words(low))
    if numbers >= 3 or (numbers >= 2 and (_HOW_MUCH.search(low) or words & _MATH_WEAK)):
        return True
    return numbers >= 1 and bool(words & _MATH_STRONG)


def _is_systems_code(text: str) -> bool:
    """C, C++ or Rust rather than another language: fence tags, language names and idioms, weighed against the
    others'."""
    tags = [t.lower() for t in _FENCE.findall(text)]
    systems = 3 * sum(t in _SYSTEMS_TAGS for t in tags) + 2 * bool(_SYSTEMS_NAME.search(text))
    other = 3 * sum(t in _OTHER_TAGS for t in tags) + 2 * bool(_OTHER_NAME.search(text))
    systems += sum(m in text for m in _SYSTEMS_MARKS)
    other += sum(m in text for m in _OTHER_MARKS)
    return systems >= 2 and systems > other


def subdomain_of(domain: str, text: str) -> str:
    """The subdomain (one of SUBDOMAINS) of `text` already classified into `domain`."""
    if domain == "chat":
        head = text.strip()[:_KIND_HEAD]
        if "translat" in head.lower() or " say " in head or " to " in head:
            if _TRANSLATE.search(head[:400].lower()):
                return "translation"
        return "math" if _is_math(head) else "chat"
    if domain == "code":
        return "systems-code" if _is_systems_code(text.strip()[:_KIND_HEAD]) else "code"
    return domain


def classify_subdomain(text: str) -> str:
    """The subdomain of a request's text: its domain, refined where acceptance differs within it (the simulator's
    acceptance is drawn per subdomain)."""
    return subdomain_of(classify_domain(text), text)
