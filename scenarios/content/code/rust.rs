use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A borrowed view over a line of a log file, tied to the buffer it came from.
pub struct LogLine<'a> {
    pub level: &'a str,
    pub target: &'a str,
    pub message: &'a str,
}

impl<'a> LogLine<'a> {
    pub fn parse(raw: &'a str) -> Option<LogLine<'a>> {
        let mut parts = raw.splitn(3, ' ');
        let level = parts.next()?;
        let target = parts.next()?.trim_end_matches(':');
        let message = parts.next().unwrap_or("");
        Some(LogLine { level, target, message })
    }
}

pub trait Scorer<T> {
    fn score(&self, item: &T) -> f64;
}

pub struct TopK<T, S: Scorer<T>> {
    k: usize,
    scorer: S,
    items: Vec<(f64, T)>,
}

impl<T: Clone, S: Scorer<T>> TopK<T, S> {
    pub fn new(k: usize, scorer: S) -> Self {
        Self { k, scorer, items: Vec::with_capacity(k + 1) }
    }

    pub fn push(&mut self, item: T) {
        let s = self.scorer.score(&item);
        let pos = self.items.partition_point(|(x, _)| *x >= s);
        if pos < self.k {
            self.items.insert(pos, (s, item));
            self.items.truncate(self.k);
        }
    }

    pub fn into_sorted(self) -> Vec<T> {
        self.items.into_iter().map(|(_, t)| t).collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Token<'src> {
    Ident(&'src str),
    Number(i64),
    Punct(char),
}

pub fn tokenize<'src>(input: &'src str) -> Result<Vec<Token<'src>>, String> {
    let mut out = Vec::new();
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i] as char).is_ascii_digit() {
                i += 1;
            }
            let n = input[start..i].parse::<i64>().map_err(|e| e.to_string())?;
            out.push(Token::Number(n));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && ((bytes[i] as char).is_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(Token::Ident(&input[start..i]));
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    Ok(out)
}

#[derive(Default)]
pub struct Cache<K, V> {
    inner: Arc<Mutex<HashMap<K, V>>>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Cache<K, V> {
    pub fn get_or_insert_with<F: FnOnce() -> V>(&self, key: &K, make: F) -> V {
        let mut guard = self.inner.lock().expect("cache poisoned");
        guard.entry(key.clone()).or_insert_with(make).clone()
    }
}

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Ident(s) => write!(f, "{s}"),
            Token::Number(n) => write!(f, "{n}"),
            Token::Punct(c) => write!(f, "{c}"),
        }
    }
}

pub async fn fetch_all<C>(client: &C, ids: &[u64]) -> Vec<Result<String, C::Error>>
where
    C: Fetch + Sync,
{
    let futures = ids.iter().map(|id| client.fetch(*id));
    futures::future::join_all(futures).await
}

pub trait Fetch {
    type Error: std::error::Error + Send + 'static;
    fn fetch(&self, id: u64) -> impl std::future::Future<Output = Result<String, Self::Error>> + Send;
}

pub fn longest<'a, 'b: 'a>(x: &'a str, y: &'b str) -> &'a str {
    if x.len() >= y.len() { x } else { y }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_mixed_input() {
        let toks = tokenize("let x1 = 42;").unwrap();
        assert_eq!(toks[0], Token::Ident("let"));
        assert_eq!(toks[3], Token::Number(42));
    }
}
