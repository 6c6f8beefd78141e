"""Development examples for cluster.sim.domains.classify_domain, and the project's own prompts.

These are the examples the classifier was tuned on; the held-out measurement lives elsewhere.
"""

from __future__ import annotations

import pytest

from cluster.sim.domains import DOMAINS, classify_domain
from scenarios.prompts import make_prompt

# ---------------------------------------------------------------------------------------------
# Longer material reused by several examples.

NEWS_DB = """\
Shares of Quillbase, the database start-up behind a popular open-source PostgreSQL extension, \
jumped eleven percent on Thursday after the company reported its first profitable quarter. \
Revenue rose to 84 million dollars, up 31 percent from a year earlier, as large banks moved \
analytics workloads off legacy warehouses and onto its managed service.
Chief executive Maria Okafor told analysts that the company's new query engine, which can run \
SQL across data stored in several clouds without copying it, had signed forty enterprise \
customers since its launch in the spring. "Nobody wants to move a petabyte twice," she said.
The results were not uniformly strong. Net retention among small customers fell for the second \
quarter in a row, and the company warned that a price increase announced in March had led to \
more cancellations than expected. Okafor said the firm would introduce a cheaper tier next year.
Analysts were broadly positive but cautioned that competition from the large cloud providers \
remains intense, and that the company spends more than forty percent of revenue on sales and \
marketing. The stock has still lost a third of its value since its listing two years ago.
"""

BLOG_RUST = """\
Two years ago our payments team rewrote its ledger service in Rust. This post is an honest look \
back. The first three months were painful: engineers used to Java fought the borrow checker daily, \
and code reviews turned into long debates about lifetimes and whether to clone. Build times were \
another surprise, and we eventually split the service into smaller crates to keep them under control.
The payoff came later. Since the rewrite we have had no memory-safety incidents and the p99 latency \
of the settlement path dropped from 40 ms to 9 ms. On-call pages for the service fell by two thirds, \
mostly because whole classes of null and concurrency bugs simply cannot be expressed any more.
Not everything went well. Hiring is harder, and two senior engineers left partly because they did \
not enjoy the language. We also underestimated how much internal tooling we would need to rebuild. \
Our advice to other teams is to start with a small, well-bounded service and to budget for training.
"""

MEETING = """\
Priya: Okay, let's start. The main item is the office move. Facilities says the new building won't \
be ready until the fifteenth of next month, so we're two weeks late.
Tom: That clashes with the customer conference. Half the sales team is travelling that week.
Priya: Right, so the proposal is we move the engineering floor first and sales the week after.
Lena: Can we get the movers on a weekend? Last time they came on a Tuesday and nobody could work.
Priya: I'll ask. Budget-wise we're about eight thousand over because of the furniture order.
Tom: Could we delay the furniture and reuse the old desks for a quarter?
Priya: Possibly. Let me check with finance. Action items: I talk to facilities about weekend movers, \
Tom sends the sales travel calendar, Lena collects who needs a standing desk. Anything else?
Lena: Parking. The new building has thirty spaces for ninety people. People are going to ask.
Priya: Good point, I'll raise it with facilities too.
"""

POSTMORTEM = """\
Incident 2291: checkout errors, 14:02-14:49 UTC.
At 14:02 a schema migration that added a NOT NULL column to the orders table began running on the \
primary database. The migration took an exclusive lock for longer than expected because the table \
had grown to 900 million rows, and checkout requests queued behind it until their connections timed \
out. Roughly 18 percent of checkouts failed during the window.
The on-call engineer paused the deploy at 14:20 but did not realise the migration itself was still \
running. At 14:41 the database team killed the migration and the failover replica took over at 14:49.
Contributing factors: the migration tool did not warn about long locks; the staging database is a \
hundred times smaller than production; the runbook did not mention migrations at all.
Follow-ups: run large migrations online with a batched backfill, add a lock timeout to every \
migration, and rehearse failover quarterly.
"""

REVIEWS = """\
1. "Battery lasts two days, screen is gorgeous. The charger it ships with is slow though." (5 stars)
2. "Stopped connecting to wifi after the update. Support was useless." (1 star)
3. "Good value. Camera is fine in daylight, bad at night." (4 stars)
4. "Arrived with a scratch on the back. Replacement came quickly, no complaints since." (4 stars)
5. "Overheats when gaming and the speaker crackles at high volume." (2 stars)
"""

EMAIL_CHAIN = """\
From: Dana
Hi all, following up on the vendor decision. Acme quoted 40k with a 12-month contract; Birch \
quoted 34k but wants 24 months. Legal is fine with either.

From: Marcus
I'd lean Birch on price, but two years is a long lock-in given we might re-platform next year.

From: Dana
Fair. Acme said they could do 37k if we sign by the end of the month.

From: Yuki
Then Acme at 37k for 12 months seems like the best balance. Finance can approve up to 38k without \
going to the board. Can we close this on Friday?

From: Marcus
Works for me.
"""

STUDY = """\
We conducted a randomised trial of 1,200 secondary-school pupils in 40 schools to test whether \
starting the school day an hour later improves attendance and exam results. Schools were \
assigned at random to a 9:30 start or to continue with an 8:30 start for two academic years. \
Pupils at late-start schools slept on average 34 minutes more per night, were absent 1.8 fewer \
days per term, and scored 0.12 standard deviations higher in mathematics; effects on reading were \
small and not statistically significant. Benefits were concentrated among pupils with the longest \
commutes. Costs were mainly for rescheduled buses and after-school activities.
"""

RELEASE_NOTES = """\
v3.2.0
- The `retry()` helper now accepts a `backoff` argument; the old `delay` argument is deprecated.
- Fixed a crash when the config file contained an empty [logging] section.
- The CLI prints progress bars only when stdout is a terminal.
- Dropped support for Python 3.8.
- The HTTP client reuses connections, which cuts request latency by about 30% in our benchmarks.
- Docs: new tutorial on writing plugins.
"""

PERSONAL_STORY = """\
So my roommate and I have lived together for three years and it's mostly been fine, but lately \
she's had her boyfriend over almost every night. He doesn't pay rent, uses our stuff, and leaves \
dishes everywhere. I brought it up once and she got defensive and said I was being controlling. \
Our lease ends in four months and I don't really want to move, but I also don't want to spend \
four months feeling like a guest in my own apartment. I've thought about asking him to chip in \
for utilities, but I'm not sure how to bring that up without starting a fight.
"""

PY_CACHE = """\
import time
from collections import OrderedDict


class TTLCache:
    def __init__(self, capacity: int, ttl: float) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._data: OrderedDict[str, tuple[float, object]] = OrderedDict()

    def get(self, key: str):
        item = self._data.get(key)
        if item is None:
            return None
        stamp, value = item
        if time.monotonic() - stamp > self.ttl:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def put(self, key: str, value: object) -> None:
        self._data[key] = (time.monotonic(), value)
        if len(self._data) > self.capacity:
            self._data.popitem(last=True)
"""

GO_HANDLER = """\
func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request) {
\tusers, err := s.store.ListUsers(r.Context())
\tif err != nil {
\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)
\t}
\tw.Header().Set("Content-Type", "application/json")
\tjson.NewEncoder(w).Encode(users)
}
"""

RESUME = """\
Jordan Lee - Senior Backend Engineer
Seattle, WA | jordan.lee@example.com | (206) 555-0143
Experience: 7 years building payment systems at Stripe-like companies; led migration of a \
monolith to services; mentored five engineers.
Skills: Go, PostgreSQL, Kafka, Kubernetes, system design.
Education: B.S. Computer Science, University of Washington, 2016.
"""

# ---------------------------------------------------------------------------------------------

CODE = [
    "Why does the borrow checker complain here?\n\nfn longest(a: &str, b: &str) -> &str {\n"
    "    if a.len() > b.len() { a } else { b }\n}",
    "Write a macro_rules! macro that builds a HashMap from a list of key => value pairs.",
    "what's the difference between a lifetime and a generic type parameter in rust? i keep mixing them up",
    "How do I fix `error[E0502]: cannot borrow `v` as mutable because it is also borrowed as immutable`?",
    "My C++ program segfaults when I push_back into a vector while iterating over it with a range-for. Why?",
    "Explain what SFINAE is in C++ templates, with a tiny example.",
    "Can you review this Python function and suggest improvements?\n\ndef avg(xs):\n    total = 0\n"
    "    for x in xs:\n        total += x\n    return total / len(xs)\n",
    "```js\nconst add = (a, b) => a + b;\nconsole.log(add(2, 3));\n```\n"
    "Why does this print 5 but add('2', 3) prints 23?",
    "Write a function in Go that reverses a singly linked list in place.",
    "I get TypeError: 'NoneType' object is not subscriptable on line 12, what does that mean",
    'Exception in thread "main" java.lang.NullPointerException\n\tat com.example.App.run(App.java:27)\n'
    "\tat com.example.App.main(App.java:14)\nwhat am i doing wrong",
    "implement binary search in python plz",
    "Is it better to use Arc<Mutex<T>> or channels for sharing state between threads in Rust?",
    "Translate this Python to idiomatic Rust:\nnums = [x * x for x in range(10) if x % 2 == 0]",
    "What does the ? operator do in Rust?",
    "How can I make this TypeScript generic accept only objects with an id field?\n"
    "function byId<T>(items: T[], id: string) { return items.find(i => i.id === id) }",
    "Refactor this to use early returns:\n\nif (user) {\n  if (user.isActive) {\n    sendWelcome(user);\n"
    "  }\n}",
    "Why is my React component re-rendering forever? I call setCount inside useEffect with no "
    "dependency array.",
    "Write pytest unit tests for a function slugify(title) that lowercases a title and replaces "
    "spaces with hyphens.",
    "What is undefined behavior in C and why do compilers exploit it when optimizing?",
    "the linker says undefined reference to `vtable for Foo` — what did i forget",
    "Write a bash script that renames every .jpeg file in a folder to .jpg",
    "How do Rust traits differ from interfaces in Java?",
    f"Find the bug: this cache evicts the wrong entry when it is full.\n\n```python\n{PY_CACHE}```",
    "Convert this callback code to async/await:\n"
    "fs.readFile(path, (err, data) => { if (err) throw err; console.log(data.toString()); });",
    "Why won't this compile?\ntemplate<typename T> T max(T a, T b) { return a > b ? a : b; }\n"
    "int main() { return max(1, 2.0); }",
    "What's the idiomatic way to handle errors in Go, should I panic or return err?",
    "data class User(val name: String, val age: Int)\nHow do I make a copy of this with only the name changed?",
    "explain the difference between == and === in javascript",
    "Optimize this loop, it's way too slow for big lists:\nfor i in range(len(a)):\n    for j in range(len(b)):\n"
    "        if a[i] == b[j]:\n            out.append(i)",
    "In Rust, when should I use Box<dyn Trait> instead of impl Trait?",
    "Help me debug: my Flask app returns 404 for /api/users even though I wrote @app.route('/api/users')",
    "what does 'static mean in rust lifetimes",
    f"This handler keeps writing a 500 and then the JSON body as well. What's wrong?\n\n{GO_HANDLER}",
    "How do I write a variadic template in C++17 that sums all its arguments with a fold expression?",
    "Can someone explain Python decorators? I understand functions but the @ syntax confuses me.",
    "my rust code wont compile, it says expected `&str`, found `String`. how do i convert between them",
    "Please write a small C program that reads numbers from stdin and prints their average.",
    "Explain what this line does: `let v: Vec<_> = s.split(',').map(str::trim).collect();`",
    "Write a Python function that returns a JSON object with the keys name and age for a given user id.",
    "Write a Flask endpoint that returns the list of users as JSON, paginated.",
    'My API returns JSON like {"id": 3, "tags": ["a"]}. How do I deserialize it in Rust with serde?',
    "Review my pull request: I replaced the recursive tree walk with an explicit stack to avoid a "
    "stack overflow on deep trees. Any edge cases I missed in the iterator implementation?",
]

SQL = [
    "Write a query that returns the top 5 customers by total order value.",
    "SELECT name, COUNT(*) FROM orders GROUP BY name HAVING COUNT(*) > 3;\n"
    "why is this so slow on 50M rows?",
    "How do window functions differ from GROUP BY in Postgres?",
    "I need a running total of sales per day in MySQL",
    "Design a schema for a small library (books, members, loans) and give me the CREATE TABLE statements.",
    "what index should I add for WHERE user_id = ? AND created_at > ? ORDER BY created_at DESC",
    "select * from users u left join orders o on o.user_id = u.id where o.id is null\n\n"
    "is there a faster way to find users with no orders",
    "Explain the difference between INNER JOIN, LEFT JOIN and FULL OUTER JOIN.",
    "How do I pivot rows into columns in SQL Server?",
    "Get the second highest salary from the employees table.",
    "Write a BigQuery query to count distinct users per week from the events table.",
    "My query returns duplicate rows after joining orders to payments, how do I dedupe them?",
    "Rewrite this correlated subquery as a join:\nSELECT e.name FROM emp e WHERE e.salary > "
    "(SELECT AVG(salary) FROM emp WHERE dept = e.dept)",
    "In SQLite, how do I upsert a row if the primary key already exists?",
    "What's the difference between a clustered and a non-clustered index?",
    "Using ROW_NUMBER() OVER (PARTITION BY dept ORDER BY salary DESC), keep only the top earner per department.",
    "Seq Scan on events  (cost=0.00..183441.00 rows=8 width=64)\n  Filter: (account_id = 42)\n"
    "why is postgres doing a seq scan when I have an index on account_id?",
    "Write a recursive CTE that walks the employee -> manager hierarchy and returns each person's depth.",
    "Find all products that were never ordered. Tables: products(id, name), order_items(order_id, product_id).",
    "how to delete duplicate rows but keep one in postgresql",
    "Should I normalize customer addresses into their own table or keep them denormalized on customers?",
    "Convert this query from Oracle to Snowflake syntax: SELECT NVL(discount, 0) FROM dual",
    "Calculate month-over-month retention from a signups table and an activity table.",
    "ALTER TABLE users ADD COLUMN is_active BOOLEAN DEFAULT true;\n"
    "will this lock the table on a big postgres db?",
    "give me sql for avg order value by country over the last 30 days",
    "What does GROUP BY 1, 2 mean in a query?",
    "Write a T-SQL stored procedure that moves orders older than a year into an archive table.",
    "How do I write a query in Snowflake to flatten a JSON column into one row per element?",
    "list the employees who earn more than their managers (the employees table has a manager_id column)",
    "Is there a way to make this use the index? SELECT * FROM logs WHERE DATE(created_at) = '2024-01-01'",
    "CREATE TABLE orders (id SERIAL PRIMARY KEY, customer_id INT REFERENCES customers(id), "
    "total NUMERIC(10,2), created_at TIMESTAMPTZ DEFAULT now());\n\nWhat indexes would you add "
    "for a dashboard that filters by customer and date?",
    "whats the diffrence between HAVING and WHERE",
    "Write a query to find gaps in a sequence of invoice numbers.",
    "We keep customers and orders in Postgres. How would I get each customer's first and most recent "
    "order date in one query?",
]

SUMMARIZE = [
    f"{NEWS_DB}\nSummarize this in three bullet points.",
    f"Summarize this article.\n\n{NEWS_DB}",
    f"TL;DR please:\n\n{BLOG_RUST}",
    f"{BLOG_RUST}\ntl;dr?",
    f"Can you give me the gist of this email thread?\n\n{EMAIL_CHAIN}",
    f"{MEETING}\nWhat are the main takeaways from this meeting?",
    f"Here are the notes from today's standup:\n{MEETING}\nRecap them in a few lines for people who missed it.",
    "Condense the following paragraph into one sentence: The committee met for four hours and, after "
    "long debate about costs and the timeline, agreed to postpone the vote on the new stadium until "
    "an independent traffic study is complete, which is expected to take at least six months.",
    f"Summarise the key points of the postmortem below for my boss, who isn't technical.\n\n{POSTMORTEM}",
    f"{POSTMORTEM}\nsummarize pls",
    f"Write an executive summary of the following study.\n\n{STUDY}",
    f"{STUDY}\nBoil that down to two sentences.",
    f"Sumarize this artcle for me:\n{NEWS_DB}",
    f"Summarize what changed in this release:\n\n{RELEASE_NOTES}",
    f"Here's a bunch of customer reviews. Summarize the common complaints and what people like.\n\n{REVIEWS}",
    f"Give me a brief recap of this conversation:\n{EMAIL_CHAIN}",
    "Summarize: The library will close for renovations from June 1 to August 15. During this time, "
    "books can be returned at the community centre, and the mobile library will visit each "
    "neighbourhood once a week. Online services are unaffected.",
    f"{MEETING}\n\nCan you sum up what was decided and who does what?",
    f"Pull out the key takeaways from this blog post in bullet points.\n\n{BLOG_RUST}",
    f"{EMAIL_CHAIN}\nWhere did we land? Give me the short version.",
    f"Please provide a one-paragraph summary of the study described below.\n{STUDY}",
    f"Shorten this to under 80 words:\n\n{STUDY}",
    f"{NEWS_DB}\nWhat are the three most important points in this article?",
    f"Give me a synopsis of the passage below.\n\n{BLOG_RUST}",
    f"{RELEASE_NOTES}\nTLDR for the changelog above? Just the stuff users will notice.",
    f"In a nutshell, what does this incident report say?\n\n{POSTMORTEM}",
    f"Summarize this for a newsletter, two short paragraphs max:\n\n{NEWS_DB}\n{STUDY}",
    "tldr: Honestly the trip was a mess. Our flight got cancelled, the hotel lost our booking, and "
    "it rained for four of the five days. But the food was incredible, we met a lovely couple from "
    "Porto, and the one sunny day at the beach made up for a lot of it.",
    f"Key points of this, please:\n\n{MEETING}",
]

STRUCTURED = [
    "Extract the name, email and phone number from this text and return them as JSON: Hi, I'm Sam "
    "Ortiz, you can reach me at sam.ortiz@example.org or 555-0199.",
    "Return a JSON array of objects with fields title and year for these movies: Alien (1979), "
    "Heat (1995), Arrival (2016).",
    "Convert the following list into YAML:\n- apples: 3\n- pears: 5\n- plums: 0",
    "Output a CSV with columns date, amount, merchant for these transactions: Mar 3 coffee shop "
    "$4.50; Mar 4 grocery store $62.10; Mar 6 gas station $40.",
    'Fill in this schema from the resume below:\n{"name": "", "email": "", "skills": [], '
    f'"years_experience": 0}}\n\n{RESUME}',
    "Give me an XML record for a book with title, author and isbn elements.",
    "You can call get_weather(city: string, unit: 'c' | 'f'). The user asked: 'is it cold in Oslo?'. "
    "Respond only with the function call arguments as JSON.",
    "Parse this address into street, city, state and zip fields: 123 Main St, Springfield, IL 62704",
    "Return JSON listing each function in this Python file with its name and the number of lines it has:\n"
    f"```python\n{PY_CACHE}```",
    "Classify the sentiment of each review. Respond in JSON with keys review_id and label.\n\n" + REVIEWS,
    "Produce a JSON Schema for a user profile object with a required name, an integer age and an optional email.",
    "extract invoice number, date and total as key: value pairs from: Invoice #4411 dated 3 March, "
    "total due $129.40",
    'Turn this recipe into structured data like {"ingredients": [...], "steps": [...]}: Mix two eggs '
    "with a cup of flour, add milk until smooth, rest for 20 minutes, then fry thin pancakes.",
    'Answer with valid JSON only, no prose, shaped {"answer": string, "sources": [string]}. '
    "Question: when was the Eiffel Tower completed?",
    f"Summarize the article below as JSON with the keys tldr and bullets.\n\n{NEWS_DB}",
    "Generate 5 fake user records as a JSON list (id, name, signup_date).",
    "Convert this table to CSV:\n| name | age |\n|------|-----|\n| Ann  | 31  |\n| Bo   | 27  |",
    "Give the answer in YAML: which planets in the solar system have rings, and how many moons does each have?",
    "Extract every date and the event that happened on it into a list of {date, event} objects:\n"
    "On 4 May the bridge closed. It reopened on 9 June after repairs, and a ceremony followed on 12 June.",
    "Tag the entities in this sentence (PERSON, ORG, LOCATION) and output JSON: Tim Cook visited "
    "Berlin to meet Siemens executives.",
    "Map each product description onto the fields brand, model, color and size. Output one JSON object per line.\n"
    "1. Nike Pegasus 40, blue, US 10\n2. Levi's 501 jeans, black, 32x32",
    "Given the tool create_event(title, start_time, attendees), return the arguments for: "
    "'lunch with Sam tomorrow at noon'",
    "Review this diff and return your findings as a JSON array of {file, line, severity, message}.\n\n"
    "--- a/app.py\n+++ b/app.py\n@@ -10,3 +10,4 @@\n def load(path):\n-    return open(path).read()\n"
    "+    f = open(path)\n+    return f.read()\n",
    "Write a TOML config with a [server] section (host, port) and a [database] section (url, pool_size).",
    f"{REVIEWS}\nFor each review return a JSON object with keys \"stars\", \"topic\" and \"sentiment\". JSON:",
    "I need this as json: meeting on Tuesday 3pm with Dana about the budget, room 4B",
    "give me a json obj w/ keys city, country, population for the 3 biggest cities in japan",
    "Use exactly this format:\nName: <name>\nRole: <role>\nStart date: <date>\n\n"
    "Text: Please welcome Aisha Khan, who joins us as Head of Design on 2 September.",
    "Reply with a JSON object {\"intent\": ..., \"slots\": {...}} for the utterance 'book a table for two at 7pm'",
    "Convert this XML to JSON: <user><id>7</id><name>Bo</name><roles><role>admin</role></roles></user>",
    f"From this resume, fill the fields name, location, years_of_experience, top_skills (list). "
    f"Return only JSON.\n\n{RESUME}",
]

CHAT = [
    "How do I get better at public speaking?",
    "Write a haiku about autumn rain.",
    "What's the capital of Australia?",
    "Translate 'where is the train station?' into German and French.",
    "Draft an email asking my landlord to fix the heating, polite but firm.",
    "How do I undo my last git commit if I've already pushed it?",
    "What are the pros and cons of working at a startup versus a big tech company as a software engineer?",
    "Can you give me a summary of the causes of the French Revolution?",
    "Explain how a bill becomes law in the US.",
    "Tell me a bedtime story about a dragon who is afraid of the dark.",
    "I'm nervous about my first week as a junior developer. Any tips for making a good impression?",
    "whats a good name for a golden retriever puppy",
    "Is it safe to eat raw cookie dough?",
    "Help me write a LinkedIn post announcing my new job as a data engineer.",
    "What is the difference between weather and climate?",
    "Recommend some sci-fi novels like The Expanse.",
    "how long should i boil an egg for a runny yolk",
    "Why do cats knock things off tables?",
    "Write a limerick about a programmer who never sleeps.",
    "Why does iron rust but stainless steel doesn't?",
    "How should I structure my week to study for the bar exam?",
    "Plan a birthday party for a 7 year old on a tight budget.",
    "Explain inflation like I'm five.",
    "My partner and I keep arguing about chores. How can we split them fairly?",
    "What should I pack for a week in Iceland in March?",
    "In summary, what are the best ways to save for retirement in your 30s?",
    "Rewrite this sentence to sound more professional: hey guys the meeting got moved to thurs lol",
    "What's the best laptop for college under $800?",
    "Help me choose between two job offers: one pays 15% more, the other is fully remote.",
    "Compose a short poem for my mom's 60th birthday.",
    "What are good questions to ask at the end of an interview for a product manager role?",
    f"{PERSONAL_STORY}\nWhat should I do? Am I being unreasonable?",
    "How does a mortgage work? Explain the key points I should know before buying my first home.",
    "How many elements are in the periodic table, and which was discovered most recently?",
    "Can you recommend a good podcast about the history of computing?",
    "What time zone should I use for a meeting between Berlin, New York and Tokyo?",
    "Give me a 3-day workout plan for a beginner who only has dumbbells.",
    "Is it rude to ask a coworker how much they earn?",
    f"Here's what my landlord sent me:\n\n{PERSONAL_STORY}\nHow should I reply to this? I don't want to "
    "sound angry.",
]


# More examples, each batch first written and measured unseen, then added here.

ART = """The river authority announced on Monday that water levels in the reservoir had fallen to 41 percent of \
capacity, the lowest for the time of year since records began in 1962. Officials urged households to cut \
consumption by a fifth and said a hosepipe ban would begin next week if there was no significant rain.
Farmers in the valley said the restrictions would hit them hardest. Several have already sold livestock early \
because pasture has dried out, and one told reporters that he expected to lose half his potato crop. The authority \
said agricultural users would be consulted before any limits on irrigation were imposed.
Environmental groups blamed decades of under-investment in leaking pipes, which lose an estimated quarter of \
treated water before it reaches customers. The authority replied that it had doubled its repair budget over the \
past three years and that leakage was now at its lowest level on record."""
TECH = """Our team migrated the billing system from a monolith to microservices over eighteen months. The biggest \
challenge was data consistency: the old system relied on database transactions spanning several tables, and in the \
new design each service owns its own database. We adopted the outbox pattern and idempotent consumers, which fixed \
most duplicate-charge bugs. Latency went up slightly for some endpoints, but deploys went from monthly to daily \
and incidents caused by unrelated changes nearly disappeared. We would do it again, but we would invest earlier in \
tracing and in contract tests between services."""
CODE2 = [
    "Why can't I return a reference to a local variable in Rust?",
    "How do move semantics work in C++ and when should I use std::move?",
    "explain the GIL in python and whether threads help for cpu-bound work",
    "My program crashes with a stack overflow when the input list is large. It's a recursive quicksort. How do "
    "I fix it?",
    "Add type hints to this:\n\ndef merge(a, b):\n    out = dict(a)\n    out.update(b)\n    return out",
    "what's the point of Option<T> instead of null",
    "Write a Rust function that parses \"key=value\" pairs separated by semicolons into a HashMap<String, String>.",
    "can u help me understand why my for loop only runs once\n\nfor (let i = 0; i < items.length; i++) {\n  "
    "process(items[i]);\n  return;\n}",
    "I'm getting 'cannot move out of borrowed content' — what does it mean and how do I usually fix it?",
    "Write a C++ class template Matrix<T> with operator* and a transpose() method.",
    "How do I read a file line by line in Go?",
    "What's the difference between a process and a thread, and how does Python's multiprocessing module use them?",
    "Code review please:\n```rust\nimpl Drop for Connection {\n    fn drop(&mut self) {\n        "
    "self.close().unwrap();\n    }\n}\n```\nIs unwrap in Drop a bad idea?",
    "Why does `[] + {}` give \"[object Object]\" in JavaScript?",
    "Write a decorator that retries a function up to three times with exponential backoff.",
    "how to make a struct printable in rust, derive Debug or impl Display?",
    "Please explain what a monad is using Haskell examples.",
    "My Java app throws OutOfMemoryError: Java heap space after running for a day. How do I find the leak?",
]
SQL2 = [
    "Which is faster in Postgres, EXISTS or IN with a subquery?",
    "How do I get the latest row per group, e.g. the most recent order for each customer?",
    "Explain what a covering index is.",
    "write sql to count orders per status for the last 7 days",
    "UPDATE accounts SET balance = balance - 100 WHERE id = 7; UPDATE accounts SET balance = balance + 100 WHERE "
    "id = 9;\nHow do I make these two statements atomic?",
    "What's the difference between UNION and UNION ALL?",
    "I have a table of events (user_id, event_type, ts). How do I compute a 7-day rolling count of events per user?",
    "Why is my LEFT JOIN behaving like an INNER JOIN when I add a WHERE condition on the right table?",
    "How should I model a many-to-many relationship between students and courses in MySQL?",
    "Give me a query that lists the departments with more than ten employees, sorted by headcount.",
    "Is it a good idea to store JSON in a Postgres jsonb column or should I make separate columns?",
    "in bigquery how do i unnest an array column",
    "What isolation level prevents phantom reads?",
    "Write the DDL for a users table with a unique email and a created_at timestamp.",
    "Optimize this query:\nSELECT * FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE country = "
    "'DE') ORDER BY created_at DESC LIMIT 50;",
]
SUMM2 = [
    f"Please read the following and give me a 3-sentence summary.\n\n{ART}",
    f"{ART}\n\nWhat's the gist?",
    f"Give me the key points from this post:\n{TECH}",
    f"{TECH}\n\nCan you summarise this for my manager?",
    f"Summary please\n\n{ART}",
    f"I don't have time to read this, what does it say in short?\n\n{ART}",
    f"Here is an article about our migration.\n\n{TECH}\n\nList the main takeaways in bullets.",
    f"condense into 2 bullet points: {TECH}",
    f"{ART}\nRecap the article above in one paragraph.",
    f"Write a TL;DR of this:\n{TECH}",
    f"Can you briefly summarize the following news story?\n{ART}",
    f"{TECH}\n\nmain points?",
    f"Give me an overview of this text in a few bullet points:\n\n{ART}",
    "Summarize the discussion:\nAlex: should we ship on friday?\nSam: no, QA found two blockers in the payment "
    "flow.\nAlex: ok, monday then, and we skip the marketing email.\nSam: agreed, I'll tell support.",
    f"{ART}\n\nsumm this up in 50 words",
]
STRUCT2 = [
    "List three primary colors as a JSON array.",
    'Respond in the following format: {"answer": "...", "confidence": 0.0}\nQuestion: Is a tomato a fruit?',
    "Output as YAML with keys name, version and dependencies for a small web app.",
    "Create a CSV of the five largest countries by area with columns country, area_km2.",
    "Extract the entities (people, organisations, places) from this sentence and return JSON: Angela Merkel met "
    "Emmanuel Macron in Paris to discuss Airbus.",
    "Give me the result as a JSON object: what are the opening hours of a typical bank?",
    f"Read the article and fill out these fields: headline, location, percent_full, actions_announced.\n\n{ART}",
    "Format the following contacts as vCard-like key: value lines:\nAnn Lee, 555-1234, ann@x.com\nBob Ray, "
    "555-9876, bob@y.com",
    "Return only a JSON list of the ingredients in: 'a pinch of salt, two eggs, 200g flour and a splash of milk'",
    "Convert this to JSON: name Alice, age 30, city Paris, hobbies reading and chess",
    "Please output a YAML file describing three employees with name, title and start_date.",
    "Produce an XML sitemap entry for https://example.com/about updated on 2024-05-01.",
    f"{TECH}\n\nReturn a JSON object with keys \"problem\", \"solution\", and \"outcome\".",
    "Call the search_flights function for: two adults from Boston to Denver on June 3. Reply with the arguments only.",
    "classify each sentence as question/statement and give me a json list with sentence and label:\n1. where are "
    "you\n2. it is raining",
]
CHAT2 = [
    "What's the difference between affect and effect?",
    "How do I deal with a coworker who keeps taking credit for my work?",
    "Tell me a joke about databases.",
    "Write a short poem about a python snake sunbathing.",
    "Can you give me a quick summary of the plot of The Great Gatsby?",
    "Explain quantum computing in simple terms.",
    "What's the best way to learn Spanish in six months?",
    "Write a thank-you note to my neighbor for watering my plants.",
    "I want to get into tech but I'm 40. Is it too late to become a software developer?",
    "Translate 'good morning, how are you?' into Japanese.",
    "What are some fun things to do in Chicago in winter?",
    "How do I set up a budget spreadsheet for my household?",
    "Which is healthier, brown rice or white rice?",
    "Give me a summary of the key events of World War I.",
    "What's the etiquette for tipping in Japan?",
    "My kid is struggling with math homework. How can I help without just giving answers?",
    "how to remove a merge conflict in git",
    "Write a tweet announcing our new coffee shop opening on Saturday.",
]

LONG_EMAIL = """Hi team,

As many of you know, we've been evaluating options for the company offsite in October. After the survey (62 \
responses), the top choices were the lake lodge (41%), the city hotel (33%) and the mountain retreat (26%). The \
lodge is the cheapest per head but only has rooms for 80, so about 15 people would need to stay in the nearby town \
and take a shuttle. The city hotel has space for everyone and is easiest to reach by train, but the meeting rooms \
are small. The mountain retreat is the most expensive and a four-hour drive away.

Finance has approved a budget of 120k. The lodge comes in at about 95k including the shuttle, the hotel at 118k, \
and the retreat at 140k, which is over budget.

We need to book by the end of next week to hold the dates. Please reply with any strong objections by Wednesday.

Thanks,
Renee"""
CODE_DOC = """The new deployment pipeline has three stages. First, every pull request runs unit tests and a linter \
in about four minutes. Second, merged changes are built into a container image, scanned for vulnerable \
dependencies, and deployed to a staging cluster where integration tests run against a copy of production data. \
Third, a release manager promotes the build to production with a canary rollout: five percent of traffic for \
thirty minutes, then fifty percent, then everyone. If error rates rise above the baseline at any step, the rollout \
stops and reverts automatically. Since adopting the pipeline, failed deploys have dropped from one in eight to one \
in fifty, though the average time from merge to production has grown from twenty minutes to about two hours."""
PYFILE = '''import json
import sys

def load(path):
    with open(path) as f:
        return json.load(f)

def main(argv):
    data = load(argv[1])
    total = sum(item["price"] * item["qty"] for item in data["items"])
    print(f"total: {total:.2f}")

if __name__ == "__main__":
    main(sys.argv)
'''
CODE3 = [
    f"{PYFILE}\nthis crashes with KeyError: 'qty' on some files. how can i make it skip items without a qty?",
    "Hey! Quick one — in TypeScript, what's the difference between `type` and `interface`?",
    "I'm learning C++ and I don't get why you'd ever use a raw pointer instead of a unique_ptr. When is it "
    "appropriate?",
    "can you write me a simple snake game in pygame",
    "Why is my Rust binary 10MB for a hello world? How do I make it smaller?",
    "Generate a regular expression that matches US phone numbers like (555) 123-4567 or 555-123-4567.",
    "My Node server leaks memory under load. What tools can I use to profile it?",
    "what does the 'mut' keyword do and why is everything immutable by default",
    "Please convert this Java code to Kotlin:\n\npublic class Point {\n    private final int x;\n    private "
    "final int y;\n    public Point(int x, int y) { this.x = x; this.y = y; }\n    public int getX() { return x; }\n}",
    "What are lifetimes elision rules?",
    "How do I write a custom iterator for my tree struct in rust",
    "Explain this error: error: expected one of `,`, `.`, `?`, or an operator, found `=>`",
    "Write a shell one-liner that counts lines in all .py files recursively.",
    "implement LRU cache in java with O(1) get and put",
    "is it bad practice to catch Exception in python?",
]
SQL3 = [
    "Can you help me write a query? I need total revenue per month for 2023 from the payments table, only for "
    "successful payments.",
    "what's faster for pagination: OFFSET or keyset?",
    "How do I find which queries are slow in MySQL?",
    "I keep getting 'column must appear in the GROUP BY clause or be used in an aggregate function'. What does "
    "that mean?",
    "Is it ok to use UUIDs as primary keys in Postgres or will it hurt performance?",
    "show me how to do a self join to find pairs of employees in the same department",
    "WITH t AS (SELECT user_id, MIN(ts) AS first_seen FROM events GROUP BY user_id) SELECT DATE(first_seen), "
    "COUNT(*) FROM t GROUP BY 1;\n\nCan you explain what this does line by line?",
    "How would you design the tables for a multi-tenant SaaS app — one schema per tenant or a tenant_id column?",
    "Convert this MySQL query to SQLite: SELECT IFNULL(name, 'n/a'), DATE_FORMAT(created, '%Y-%m') FROM users",
    "count the number of users who signed up each day in the last month but never logged in",
]
SUMM3 = [
    f"{LONG_EMAIL}\n\nCan you summarize this email in 3 bullets?",
    f"tl;dr this for me\n\n{LONG_EMAIL}",
    f"Please summarize the article below, it's about our deploy pipeline.\n\n{CODE_DOC}",
    f"{CODE_DOC}\n\nWhat are the key points here? Keep it under 50 words.",
    f"Could you give me a short summary? {CODE_DOC}",
    f"Summarize in one sentence:\n{CODE_DOC}",
    f"{LONG_EMAIL}\n\nSummarise the options and costs for me.",
    f"I got this email from my boss, can you tell me the main points?\n\n{LONG_EMAIL}",
]
STRUCT3 = [
    f"{LONG_EMAIL}\n\nExtract the venues with their cost and capacity as a JSON array.",
    "Return a YAML list of the planets with their order from the sun.",
    "Give me a JSON object describing a fictional character: name, age, hometown, and three traits.",
    f"From this email, pull out: deadline, budget, options (list). Output JSON.\n\n{LONG_EMAIL}",
    "Generate test data: 10 rows of CSV with id,name,email,signup_date",
    "Output the following as XML: order 17, two items: pen x3, notebook x1.",
    "Reply only with JSON in the form {\"city\": string, \"temp_c\": number} for: It's 21 degrees in Lyon right now.",
    "For the text below, identify the sentiment and topic, formatted as JSON.\n\nThe new update drains my battery "
    "and the camera app keeps crashing.",
    "List the steps to make tea as a JSON array of strings.",
    f"Describe the functions in this file as JSON with name, args and purpose.\n```python\n{PYFILE}```",
]
CHAT3 = [
    "What's a good way to apologise to a friend after missing their birthday?",
    "Should I learn to drive stick shift?",
    "Can you recommend a good book on the history of databases and computing? Something readable.",
    "Write me a short story about a robot who learns to paint.",
    "My dog keeps barking at night. What can I do?",
    "What are the main differences between Buddhism and Hinduism?",
    "Summarize the pros and cons of electric cars vs hybrids.",
    "Give me 5 ideas for a team-building activity for remote engineers.",
    "What should I name my Python-themed coffee mug business?",
    "How do I politely ask my boss for a raise?",
    "Explain the offside rule in soccer.",
    "what are some good git branching strategies for a small team",
    f"{LONG_EMAIL}\n\nHow should I reply? I think the lodge is a bad idea because of the shuttle.",
    "Write a wedding speech for my best friend, funny but heartfelt.",
    "What does a product manager actually do all day?",
]

ARTICLE = """Researchers at the university have developed a battery that charges in under ten minutes and keeps 90 \
percent of its capacity after 5,000 cycles. The design replaces the graphite anode with a niobium-based material \
that lets lithium ions move more freely. The team says the cells could reach electric cars within five years, \
though manufacturing niobium at scale remains expensive, and the world's supply is concentrated in a single \
country. Independent experts welcomed the results but noted that laboratory cells often perform worse once they \
are scaled up to the size used in vehicles."""
CHANGELOG_DB = """In this release we rewrote the storage engine's compaction logic. Previously, compaction ran in \
a single background thread and could fall behind on write-heavy workloads, causing read latency to spike. \
Compaction is now split into levels that run in parallel, with a rate limiter so it cannot starve foreground \
queries. We also added support for partial indexes and fixed a bug where ALTER TABLE on very large tables held a \
lock for the entire operation. Benchmarks show a 35% improvement in p99 read latency on our standard write-heavy \
test."""
SNIPPET = """fn main() {
    let v = vec![1, 2, 3];
    let first = &v[0];
    v.push(4);
    println!("{}", first);
}"""
CODE4 = [
    f"{SNIPPET}\n\nerror[E0502]: cannot borrow `v` as mutable because it is also borrowed as immutable\n\nwhy??",
    "Can you explain how trait objects and dynamic dispatch work in Rust? No code needed, just the concepts.",
    "Write a macro that generates getters for every field of a struct.",
    "What's the best way to structure a large Python project with multiple packages?",
    "I'm confused about C++ templates vs Java generics. Are they the same idea?",
    "Why does my program print garbage values when I forget to initialize a variable in C?",
    "how do i center a div",
    "Explain recursion using a factorial function in JavaScript.",
    "Implement quicksort in Haskell and explain each line.",
    "Segmentation fault (core dumped) — my program reads a file into a char buffer[256]. What could cause this?",
    "What is the time complexity of inserting into a HashMap in Java and why?",
    "Write a Python script to download all images from a webpage.",
    "Is `unsafe` in Rust ever a good idea?",
    "Can someone review my approach: I store sessions in a global dict keyed by user id and clear it every hour "
    "with a background thread.",
    "What's the difference between let, const and var?",
]
SQL4 = [
    "Write a query to find the top 3 products by revenue in each category.",
    "How do indexes work in a relational database, and when do they slow things down?",
    "Postgres: how do I see which index a query is using?",
    "i need to join three tables: users, orders, and products, and get the total spent per user on each "
    "product category",
    "Explain window functions like LAG and LEAD with an example.",
    "DELETE FROM sessions WHERE last_seen < now() - interval '30 days'; -- takes forever, any tips?",
    "What's the SQL to get the number of distinct visitors per page per day?",
    "How do I handle NULLs in a SUM so the result isn't NULL?",
    "In MySQL, what's the difference between CHAR and VARCHAR?",
    "Create an index that speeds up searching customers by last name and city.",
]
SUMM4 = [
    f"{ARTICLE}\n\nSummarize.",
    f"Give me a two-line summary of this:\n{ARTICLE}",
    f"Here's our release announcement. Summarize it for customers who don't care about internals.\n\n{CHANGELOG_DB}",
    f"{CHANGELOG_DB}\n\nTL;DR",
    f"What are the key takeaways of the following text? {ARTICLE}",
    f"Please recap the following:\n\n{ARTICLE}",
    f"{ARTICLE}\n\nSum it up in one tweet-length sentence.",
    f"Condense this changelog into three bullets:\n{CHANGELOG_DB}",
    f"{CHANGELOG_DB}\nCan you give me the gist?",
    f"I need a summary of the passage below for a newsletter.\n\n{ARTICLE}",
]
STRUCT4 = [
    "Return the answer as JSON: {\"country\": ..., \"capital\": ...} for France, Peru and Kenya.",
    f"{ARTICLE}\n\nExtract: technology, institution, timeline, risks. Respond with a JSON object.",
    "Produce a YAML config for a GitHub Actions workflow that runs tests on push.",
    "Give me a CSV (header row included) of the days of the week and whether they are weekdays.",
    "I need a JSON schema describing an order with id, items (array of sku and qty) and total.",
    "Output these people as XML with <person> elements: Ana (34, Lisbon), Tom (29, Leeds).",
    f"{CHANGELOG_DB}\n\nReturn JSON: {{\"component\": string, \"change\": string, \"impact\": string}} for each "
    "change.",
    "Extract the product name, price and currency from 'The Acme X2 costs 499 euros' into JSON.",
    "Fill this template: Title: <title>\nAuthor: <author>\nYear: <year>\nfor the book 'Dune'.",
    "Turn the following into a JSON array of strings: apples, oranges, kiwis, mangos",
]
CHAT4 = [
    "How do I stop procrastinating?",
    "What's the difference between a crocodile and an alligator?",
    "Write a cover letter for a barista job.",
    "Can you summarize what you know about the history of the Silk Road?",
    "Recommend a good laptop for programming under $1000.",
    "How do I squash the last three commits in git?",
    "Translate this into Spanish: 'The meeting has been moved to Thursday at 3pm.'",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "What does a database administrator do, and is it a good career?",
    "I'm feeling overwhelmed at work. Any advice?",
    "Explain how the stock market works to a teenager.",
    "Tell me about the Python programming language's history and who created it.",
    "Make a packing list for a weekend camping trip.",
    "What's the plural of 'octopus'?",
    "Help me write an out-of-office email for my vacation next week.",
]

DOC = """Acme Robotics said on Wednesday it would cut 200 jobs, about 12 percent of its workforce, as demand for \
warehouse robots slowed. The company, which went public last year, said the cuts would mostly affect its \
manufacturing and sales teams and would save about 30 million dollars a year. Its chief executive said the company \
remained committed to its new line of delivery robots, which are due to launch next spring, and that engineering \
headcount would be largely protected. Shares fell 6 percent in after-hours trading."""
PY = """class Stack:
    def __init__(self):
        self.items = []
    def push(self, x):
        self.items.append(x)
    def pop(self):
        return self.items.pop()
    def peek(self):
        return self.items[-1]
"""
SQLQ = """SELECT d.name, AVG(e.salary) AS avg_salary
FROM departments d
JOIN employees e ON e.department_id = d.id
GROUP BY d.name
HAVING AVG(e.salary) > 70000;"""
CODE5 = [
    f"What's wrong with this?\n\n{PY}\nIt throws IndexError when I peek an empty stack.",
    "explain the rust ownership model like i'm 5",
    "Why do I get 'undefined is not a function' when calling map on my API response?",
    "Write a generic function in TypeScript that deep-merges two objects.",
    "I have a race condition between two goroutines writing to the same map. How do I fix it?",
    "convert this to a list comprehension: result = []\nfor x in nums:\n    if x > 0:\n        result.append(x * 2)",
    "what is a closure in javascript, with an example please",
    "Help! My C++ code compiles on Linux but on Windows MSVC gives error C2065: undeclared identifier.",
    "Write unit tests for this Stack class:\n```python\n" + PY + "```",
    "When should I use a trait object vs an enum in Rust for a plugin system?",
]
SQL5 = [
    f"{SQLQ}\n\nCan you explain what this query does?",
    f"Is there a bug in this query? It returns no rows.\n{SQLQ}",
    "how do i write a query that finds duplicate emails in the users table",
    "What is the difference between a view and a materialized view in Postgres?",
    "Help me write SQL to calculate the churn rate per month.",
    "Which columns should I index for this: SELECT * FROM orders WHERE status = 'open' AND region = 'EU' ORDER BY "
    "created_at?",
    "Explain database normalization: 1NF, 2NF and 3NF with examples.",
    "write a sql query to get the 5 most recent orders for customer 42",
]
SUMM5 = [
    f"{DOC}\n\nSummarize the article in two sentences.",
    f"Summarize:\n\n{DOC}",
    f"Can you give me the key points from this news story?\n{DOC}",
    f"{DOC}\nWhat's the TL;DR?",
    f"Please condense the text below into a single headline and a one-line summary.\n\n{DOC}",
    f"Recap this for me in plain English:\n\n{DOC}",
    f"Main takeaways?\n\n{DOC}",
    f"Here is a press release. Give me a short summary and the three most important facts.\n\n{DOC}",
]
STRUCT5 = [
    f"{DOC}\n\nReturn JSON with keys company, jobs_cut, percent, savings.",
    f"Read this and output a YAML document with fields: company, event, numbers (list).\n\n{DOC}",
    "List the US states that border Canada as a JSON array.",
    "Convert the stack class below into a JSON description with class name, methods and their "
    f"arguments.\n```python\n{PY}```",
    "Give me the results as CSV: name,score for Alice 90, Bob 85, Cara 77",
    "Extract all email addresses from this text and return them as a JSON list: contact bob@x.io or sales@acme.com",
    "Respond ONLY with a JSON object {\"tool\": \"search\", \"query\": \"...\"} for the question: who won the "
    "2018 world cup?",
    "Please structure this as key-value pairs: Name John Smith Age 42 Occupation teacher City Denver",
]
CHAT5 = [
    "What's a good summary of my strengths to put on a resume if I've been a teacher for 10 years?",
    "How do I revert a file to a previous commit in git?",
    "Write a haiku about SQL databases.",
    "Explain what an algorithm is to a child.",
    "What are good gift ideas for a coworker who loves coffee?",
    "How can I be more productive when working from home?",
    "Give me a brief summary of the history of the internet.",
    "What should I consider before adopting a cat?",
    "Draft a toast for my parents' 30th anniversary.",
    "Is it better to pay off debt or invest?",
]

SYS = "You are a helpful assistant. Answer concisely.\n\n"
TRANSCRIPT = """Interviewer: Thanks for joining us. Can you tell us how the project started?
Dr. Osei: It began as a side experiment. We were measuring soil moisture with cheap sensors and noticed the \
readings drifted with temperature, so we built a correction model.
Interviewer: And that became the product?
Dr. Osei: Eventually. Farmers told us the corrected readings saved them about a fifth of their irrigation water, \
and a cooperative offered to fund a pilot across forty farms.
Interviewer: What was the hardest part?
Dr. Osei: Honestly, logistics. Getting sensors into the ground before planting season, replacing batteries, \
training people. The science was the easy bit."""
RUSTFN = """fn first_word(s: &String) -> &str {
    let bytes = s.as_bytes();
    for (i, &item) in bytes.iter().enumerate() {
        if item == b' ' {
            return &s[0..i];
        }
    }
    &s[..]
}"""
CODE6 = [
    SYS + "Why does this function need a lifetime annotation if I change the signature to take two strings?\n\n"
    + RUSTFN,
    "Write a macro_rules! macro called `hashset!` that works like vec! but builds a HashSet.",
    "Quick C++ question: why do people say never to call virtual functions in a constructor?",
    "My Python async code hangs forever when I call asyncio.run inside a Jupyter notebook. What's going on?",
    "Explain what `impl<T: Display> fmt::Debug for Wrapper<T>` means piece by piece.",
    "write a function that checks if a string is a palindrome, ignoring punctuation",
    SYS + "What's the difference between a shallow copy and a deep copy in Python?",
    "How can I avoid the diamond problem with multiple inheritance in C++?",
    "Thread 'main' panicked at 'index out of bounds: the len is 3 but the index is 5', src/main.rs:14:5. How do I "
    "find where this comes from?",
    "Can you add error handling to this?\n\nconst data = await fetch(url).then(r => r.json());\nrender(data.items);",
    "What does the borrow checker actually check? I understand ownership but not what 'borrowed' means in practice.",
    "Port this bash script to Python: for f in *.log; do gzip \"$f\"; done",
]
SQL6 = [
    SYS + "How do I get the running balance per account ordered by transaction date?",
    "what is a CTE and when is it better than a subquery",
    "Write a query that returns each customer's most expensive order along with the order date.",
    "How do you do an anti-join in SQL?",
    "Our Postgres table has 2 billion rows and count(*) takes minutes. Any way to get a fast approximate count?",
    "SELECT region, SUM(amount) FROM sales GROUP BY ROLLUP(region);\nWhat does ROLLUP add here?",
    "Design tables for a blog: posts, authors, tags, and comments. Include foreign keys.",
    "how to select rows from the last 24 hours in sqlite",
]
SUMM6 = [
    f"{TRANSCRIPT}\n\nSummarize this interview in a paragraph.",
    f"Below is an interview transcript. Give me the three key points.\n\n{TRANSCRIPT}",
    f"Give me the tl;dr of this interview:\n{TRANSCRIPT}",
    SYS + f"Summarize the following transcript:\n\n{TRANSCRIPT}",
    f"{TRANSCRIPT}\n\nwhat were the main points?",
    f"Can you write a brief summary of this conversation for our blog?\n\n{TRANSCRIPT}",
    f"{TRANSCRIPT}\n\nCondense to 3 bullet points, please.",
    f"Make this shorter, keep only what matters:\n\n{TRANSCRIPT}",
]
STRUCT6 = [
    f"{TRANSCRIPT}\n\nExtract the speaker names and the number of lines each spoke as JSON.",
    "Output a JSON object with keys 'title', 'genre' and 'year' for the movie Inception.",
    SYS + "Return your answer as YAML: list three benefits of exercise with a one-line explanation each.",
    "Please return a CSV with the columns planet,diameter_km,moons for the inner planets.",
    "Fill in the JSON: {\"city\": ?, \"country\": ?, \"population_millions\": ?} for Tokyo.",
    "Give me XML for an RSS item with a title, link and pubDate.",
    "Turn this sentence into a JSON object with subject, verb and object: 'The cat chased the mouse.'",
    "Call the get_stock_price tool with the right arguments for: 'how is apple stock doing?' Respond with JSON only.",
]
CHAT6 = [
    SYS + "What's the tallest mountain in Africa?",
    "Can you help me plan a surprise party for my wife's 40th?",
    "How do I ask for feedback from my manager without seeming insecure?",
    "Write a song about a rainy Monday morning.",
    "What's the difference between a virus and a bacterium?",
    "Please translate this paragraph into French: We are delighted to invite you to our annual garden party on "
    "the 14th of June.",
    "What's a good summary line for my dating profile? I like hiking and cooking.",
    "How should I prepare for a system design interview at a big tech company?",
    "Why is the ocean salty?",
    "What's the best way to clean a cast iron pan?",
    "git pull says I have divergent branches, what should I do?",
    "Explain the difference between a recession and a depression.",
]

MEMO = """To all staff: beginning March 1, the office will switch to a hybrid schedule. Teams will be in the \
office on Tuesdays and Thursdays, and may work remotely the other days. Desk booking will move to the new app, \
which also handles parking. Managers can request exceptions for roles that require on-site presence, such as \
reception and IT support. We will review the policy after three months based on a staff survey and occupancy data. \
Please direct questions to HR."""
BUGREPORT = """Steps to reproduce: open the settings page, change the language to German, and click save. \
Expected: the page reloads in German. Actual: the page reloads in English and the setting is lost. This happens \
only in Safari 17; Chrome and Firefox work. The console shows a 403 on the /api/preferences request, which \
suggests the CSRF cookie is not being sent. A colleague thinks it might be related to the SameSite change we \
shipped last week."""
GOCODE = """package main

import "fmt"

func main() {
    ch := make(chan int)
    go func() { ch <- 42 }()
    fmt.Println(<-ch)
    close(ch)
    ch <- 1
}"""
CODE7 = [
    f"{GOCODE}\n\nWhy does this panic?",
    "What are Rust lifetimes actually for? The book's explanation didn't click for me.",
    "Give me a C++ example of CRTP and explain when it's useful.",
    "how do i make a python class iterable",
    "Write a Kotlin extension function that capitalizes every word in a string.",
    "My Java Spring app fails to start with 'BeanCreationException: Error creating bean with name dataSource'. Ideas?",
    "Is there any performance difference between ++i and i++ in modern C++?",
    "Write a Rust macro that asserts two floats are approximately equal.",
    "Why does Python say 'UnboundLocalError: local variable referenced before assignment' when I use a global "
    "counter inside a function?",
    "What's the idiomatic way to read a whole file into a String in Rust?",
    "Here's a bug report from a user. Can you suggest what code change in our Django CSRF middleware settings "
    f"would fix it?\n\n{BUGREPORT}",
    "Refactor: replace the nested callbacks with promises.\n\ngetUser(id, function(u) {\n  getOrders(u, "
    "function(o) {\n    render(o);\n  });\n});",
]
SQL7 = [
    "Write a query to compute a 30-day moving average of daily revenue.",
    "what's the difference between TRUNCATE and DELETE",
    "How can I speed up a query that filters on a JSONB field in Postgres?",
    "I need SQL that returns customers who bought product A but never product B.",
    "Explain what a composite index is and when column order matters.",
    "Write a MERGE statement for SQL Server that syncs a staging table into the target table.",
    "select count(*) from orders where created_at > now() - interval '1 day' -- this returns 0 but I know there "
    "are orders today, why?",
    "In BigQuery, how do I get the first event per user per day?",
]
SUMM7 = [
    f"{MEMO}\n\nSummarize this memo in two bullet points.",
    f"Give me a quick summary of this bug report for the standup:\n\n{BUGREPORT}",
    f"tl;dr:\n{MEMO}",
    f"{BUGREPORT}\n\nCan you boil this down to one sentence for the ticket title?",
    f"What's the gist of this memo?\n\n{MEMO}",
    f"Please summarize the following for a customer-facing status page. Keep it non-technical.\n\n{BUGREPORT}",
    f"{MEMO}\nKey points only, please.",
]
STRUCT7 = [
    f"{BUGREPORT}\n\nConvert this bug report into JSON with fields: steps, expected, actual, browser, suspected_cause.",
    f"{MEMO}\n\nExtract the policy details as YAML: start_date, office_days, booking_tool, review_after.",
    "Return a JSON array with the names of the seven continents.",
    "Give me sample data in CSV format: 5 rows with product, price, stock.",
    "Generate a JSON object representing a shopping cart with two items.",
    "Respond with a YAML mapping of HTTP status codes 200, 404 and 500 to their meanings.",
    "For the sentence 'Book a flight from Paris to Rome on May 3rd', produce the arguments for "
    "book_flight(origin, destination, date) as JSON.",
    "Output XML with a root <library> and two <book> entries (title, author).",
]
CHAT7 = [
    "Why do we have leap years?",
    "Write a poem about the ocean at night.",
    "What are some tips for a first-time manager?",
    "How do I get my toddler to sleep through the night?",
    "Explain the difference between an LLC and a sole proprietorship.",
    "Could you give me a summary of what a Roth IRA is?",
    "What should I write in a sympathy card for a coworker?",
    "How do I rebase my feature branch onto main in git?",
    "Is learning Rust worth it for a career in 2024?",
    "Write a short bio for my photography website.",
    f"My boss sent this:\n\n{MEMO}\n\nDo you think it's reasonable to ask for a permanent remote exception because "
    "of my commute?",
    "What's the best way to memorize vocabulary for a language exam?",
]

REPORT = """Quarterly sustainability report, Q2. Energy use across our three data centres fell 8% compared with \
Q1, mainly because the new cooling system in Frankfurt came online in April. Renewable electricity now covers 71% \
of consumption, up from 64%. Water usage rose slightly due to a heatwave in June. Scope 3 emissions remain hard to \
measure; we have started collecting data from our ten largest suppliers and expect a first estimate in Q4. The \
board approved a target of 90% renewable electricity by the end of next year, with a budget of 2.4 million for \
on-site solar at the Dublin facility."""
CPP = """#include <vector>
#include <iostream>

int main() {
    std::vector<int> v{1, 2, 3};
    for (auto it = v.begin(); it != v.end(); ++it) {
        if (*it == 2) v.erase(it);
    }
    std::cout << v.size() << std::endl;
}"""
CODE8 = [
    f"{CPP}\n\nThis sometimes crashes. What's the bug?",
    "How do lifetimes interact with structs that hold references in Rust? Say a Parser that borrows the input string.",
    "Implement a thread-safe singleton in C++11.",
    "In JavaScript, why does setTimeout inside a for loop with var print the same number five times?",
    "What's a good way to unit test code that calls an external HTTP API in Python?",
    "Write a Rust program that counts word frequencies in a text file and prints the top 10.",
    "Can you explain what a vtable is and how virtual dispatch works under the hood?",
    "Please help me fix: TypeError: Cannot read properties of undefined (reading 'map')",
    "Write a declarative macro in Rust that implements a trait for a list of types.",
    "Is it better to use composition or inheritance here? I have Dog and Cat classes that share a lot of behaviour.",
    "write a python function to flatten a nested list",
    "What does `#[derive(Clone, Copy)]` do and when can't I derive Copy?",
]
SQL8 = [
    "Write a SQL query that pivots monthly sales into one column per month.",
    "What's the difference between RANK and DENSE_RANK?",
    "How do I find and kill long-running queries in Postgres?",
    "Help me design an index strategy for a table that's written 10k times a second and queried by user_id and "
    "time range.",
    "write a query to list employees hired in the last 90 days along with their department name",
    "Why would a query be fast in psql but slow from my application?",
    "Explain how LEFT JOIN LATERAL works with an example.",
    "SELECT user_id, COUNT(*) FROM logins GROUP BY user_id ORDER BY 2 DESC LIMIT 10;\nHow can I also show each "
    "user's last login time?",
]
SUMM8 = [
    f"{REPORT}\n\nSummarize the report in three bullet points for the newsletter.",
    f"Give me a TL;DR of this report:\n\n{REPORT}",
    f"Here's our Q2 sustainability report. What are the key takeaways?\n\n{REPORT}",
    f"{REPORT}\n\ncan u summarise this",
    f"Condense the following into a two-sentence abstract:\n{REPORT}",
    f"Please give a short recap of the report below for the board.\n\n{REPORT}",
    f"{REPORT}\n\nWhat's the short version?",
    f"Summary of this?\n\n{REPORT}",
]
STRUCT8 = [
    f"{REPORT}\n\nExtract all percentages with what they refer to, as a JSON list of objects with keys metric "
    "and value.",
    f"Turn this report into YAML with keys: energy_change, renewable_share, water, targets.\n\n{REPORT}",
    "Return a JSON object mapping each weekday to the number of letters in its name.",
    "Generate a CSV table of 4 fictional employees with name, department and salary.",
    "Give me an XML document for a purchase order with a buyer, two line items and a total.",
    "Respond only in JSON: {\"answer\": \"yes\" | \"no\", \"reason\": string}. Is Pluto a planet?",
    "Fill in this form from the email: Name: <name>\nCompany: <company>\nRequest: <request>\n\nEmail: Hi, this is "
    "Maya from Orbit Labs, we'd like a quote for 50 licenses.",
    "The user said: 'remind me to call mom at 6pm'. Output the function call arguments for set_reminder(time, "
    "text) as JSON.",
]
CHAT8 = [
    "What's the healthiest way to lose 5 kg before summer?",
    "Write a limerick about a cat who loves lasagna.",
    "Can you explain how airplanes stay in the air?",
    "What are the pros and cons of living in a big city?",
    "Give me a summary of the rules of chess for a beginner.",
    "How do I get rid of fruit flies in my kitchen?",
    "Draft a LinkedIn message asking a former colleague for a referral.",
    "What's the difference between 'who' and 'whom'?",
    "How do I undo a git merge that I haven't pushed yet?",
    "I'm a nurse thinking of switching to software engineering. Where should I start?",
    "Translate 'thank you for your patience' into Italian and Portuguese.",
    f"My manager shared this report:\n\n{REPORT}\n\nShould I be worried about my job in the Dublin facility?",
]

CODE += CODE2 + CODE3 + CODE4 + CODE5 + CODE6 + CODE7 + CODE8
SQL += SQL2 + SQL3 + SQL4 + SQL5 + SQL6 + SQL7 + SQL8
SUMMARIZE += SUMM2 + SUMM3 + SUMM4 + SUMM5 + SUMM6 + SUMM7 + SUMM8
STRUCTURED += STRUCT2 + STRUCT3 + STRUCT4 + STRUCT5 + STRUCT6 + STRUCT7 + STRUCT8
CHAT += CHAT2 + CHAT3 + CHAT4 + CHAT5 + CHAT6 + CHAT7 + CHAT8

EXAMPLES = [(d, t) for d, ts in (("code", CODE), ("sql", SQL), ("summarize", SUMMARIZE),
                                 ("structured", STRUCTURED), ("chat", CHAT)) for t in ts]


@pytest.mark.parametrize(("domain", "text"), EXAMPLES, ids=[f"{d}-{i}" for i, (d, _) in enumerate(EXAMPLES)])
def test_dev_example(domain: str, text: str) -> None:
    assert classify_domain(text) == domain


def test_enough_examples_per_domain() -> None:
    for d in DOMAINS:
        assert sum(1 for dd, _ in EXAMPLES if dd == d) >= 25


@pytest.mark.parametrize("tokens", [20, 50, 200, 800, 3000])
@pytest.mark.parametrize(("domain", "language"), [("chat", None), ("code", "rust"), ("code", "cpp"),
                                                  ("code", "python"), ("sql", None), ("summarize", None),
                                                  ("structured", None)])
def test_make_prompt(domain: str, language: str | None, tokens: int) -> None:
    wrong = []
    for uid in range(30):
        for pick in range(0, 301, 7):  # steps of 7 reach every instruction and 43 body offsets
            text = make_prompt(domain, language, tokens, uid * 7919 + 13, pick)
            got = classify_domain(text)
            if got != domain:
                wrong.append((uid, pick, got, text[:120]))
    assert not wrong, wrong[:5]


def test_short_summary_asks() -> None:
    doc = ("The bakery on Elm Street will close at the end of the month after thirty years. The owners, "
           "who are retiring, said rising rent and the lack of a buyer left them no choice.")
    for ask in ("Summarize this:", "TL;DR", "Give me the gist.", "What's the main point here?",
                "Recap in one line:", "Key takeaways?"):
        assert classify_domain(f"{ask}\n{doc}") == "summarize", ask
        assert classify_domain(f"{doc}\n{ask}") == "summarize", ask


def test_edge_inputs() -> None:
    assert classify_domain("") == "chat"
    assert classify_domain("   \n ") == "chat"
    assert classify_domain("x" * 50_000) in DOMAINS
    assert classify_domain("{" * 20_000) in DOMAINS
