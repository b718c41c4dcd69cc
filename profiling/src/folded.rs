//! Collapsed ("folded") stacks: one `root;caller;callee count` line per distinct stack.
//!
//! This is the interchange format of Brendan Gregg's `stackcollapse-*` scripts and of
//! `inferno`. Unlike pprof protobufs, two folded profiles merge by plain addition of the
//! counts of identical lines, which is how `cluster-profile` combines the CPU profiles of
//! every process of a crawl into one flamegraph (see `/debug/pprof/folded`).

use std::collections::BTreeMap;
use std::fmt;

use inferno::flamegraph::{self, color, Options};

/// Samples per distinct stack. Stacks are `;`-separated frame names, root first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stacks {
    counts: BTreeMap<String, u64>,
}

/// A line of folded text that is not `stack count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub text: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "folded stacks line {}: expected `frame;frame;... count`, got {:?}",
            self.line, self.text
        )
    }
}

impl std::error::Error for ParseError {}

impl Stacks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `count` samples to `stack` (an already folded `a;b;c`). Empty stacks and zero
    /// counts are ignored.
    pub fn add(&mut self, stack: &str, count: u64) {
        if stack.is_empty() || count == 0 {
            return;
        }
        match self.counts.get_mut(stack) {
            Some(c) => *c = c.saturating_add(count),
            None => {
                self.counts.insert(stack.to_string(), count);
            }
        }
    }

    /// Parses folded text. Blank lines and `# ` comment lines are skipped; identical stacks
    /// on several lines are summed.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut stacks = Self::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with("# ") {
                continue;
            }
            let parsed = line
                .rsplit_once(' ')
                .and_then(|(stack, n)| Some((stack.trim_end(), n.parse::<u64>().ok()?)))
                .filter(|(stack, _)| !stack.is_empty());
            let Some((stack, count)) = parsed else {
                return Err(ParseError {
                    line: i + 1,
                    text: line.chars().take(200).collect(),
                });
            };
            stacks.add(stack, count);
        }
        Ok(stacks)
    }

    /// Adds every stack of `other`.
    pub fn merge(&mut self, other: &Stacks) {
        for (stack, &count) in &other.counts {
            self.add(stack, count);
        }
    }

    /// Adds every stack of `other` below an extra root frame `root` (for example the role of
    /// the process it came from), so the flamegraph splits by `root` at the bottom.
    pub fn merge_under(&mut self, root: &str, other: &Stacks) {
        let mut prefixed = String::new();
        push_frame(&mut prefixed, root);
        prefixed.push(';');
        let keep = prefixed.len();
        for (stack, &count) in &other.counts {
            prefixed.truncate(keep);
            prefixed.push_str(stack);
            self.add(&prefixed, count);
        }
    }

    /// Total number of samples.
    pub fn samples(&self) -> u64 {
        self.counts.values().fold(0, |a, &c| a.saturating_add(c))
    }

    /// Number of distinct stacks.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// `(stack, count)` in stack order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.counts.iter().map(|(s, &c)| (s.as_str(), c))
    }

    /// The folded text, one `stack count` line per stack, sorted by stack.
    pub fn to_text(&self) -> String {
        let mut out = String::with_capacity(self.counts.keys().map(|s| s.len() + 8).sum());
        for (stack, count) in &self.counts {
            out.push_str(stack);
            out.push(' ');
            out.push_str(&count.to_string());
            out.push('\n');
        }
        out
    }

    /// Renders an interactive SVG flamegraph (click to zoom, Ctrl-F to search). Colours are
    /// derived from function names, so a function has the same colour in every file. With
    /// no samples the SVG just says so.
    pub fn flamegraph_svg(&self, title: &str, subtitle: Option<&str>) -> Vec<u8> {
        if self.is_empty() {
            return empty_svg(title);
        }
        let mut opts = Options::default();
        opts.title = title.to_string();
        opts.subtitle = subtitle.map(str::to_string);
        opts.count_name = "samples".into();
        opts.colors = color::Palette::Multi(color::MultiPalette::Rust);
        opts.hash = true;
        let text = self.to_text();
        let mut svg = Vec::with_capacity(64 * 1024 + text.len() * 2);
        // Only fails on empty input (handled above) or a failing writer (a Vec cannot).
        if let Err(err) = flamegraph::from_lines(&mut opts, text.lines(), &mut svg) {
            let mut fallback = empty_svg(title);
            let note = format!(
                "<!-- flamegraph rendering failed: {} -->\n",
                xml_escape(&err.to_string())
            );
            fallback.extend_from_slice(note.as_bytes());
            return fallback;
        }
        svg
    }
}

/// Appends one frame name to a folded stack, replacing what would break the format: `;`
/// (frame separator; Rust array types such as `[u8; 4]` contain it) becomes `,`, line
/// breaks become spaces, and an empty name becomes `[unknown]`.
pub fn push_frame(out: &mut String, name: &str) {
    if name.is_empty() {
        out.push_str("[unknown]");
        return;
    }
    out.extend(name.chars().map(|c| match c {
        ';' => ',',
        '\n' | '\r' => ' ',
        c => c,
    }));
}

fn empty_svg(title: &str) -> Vec<u8> {
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"1200\" height=\"80\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <text x=\"600\" y=\"24\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"17\">{}</text>\n\
         <text x=\"600\" y=\"56\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"12\">no CPU samples (the process was idle)</text>\n\
         </svg>\n",
        xml_escape(title)
    )
    .into_bytes()
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_merge_and_print() {
        let a =
            Stacks::parse("main;crawl;fetch 3\n\nmain;crawl 1\n# comment\nmain;crawl;fetch 2\r\n").unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a.samples(), 6);
        assert_eq!(a.to_text(), "main;crawl 1\nmain;crawl;fetch 5\n");

        // Frames may contain spaces: only the last space separates the count.
        let b = Stacks::parse("main;<impl Foo for Bar>::go 4").unwrap();
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            vec![("main;<impl Foo for Bar>::go", 4)]
        );

        let mut all = Stacks::new();
        all.merge_under("dispatcher", &a);
        all.merge_under("crawler-child", &b);
        all.merge_under("crawler-child", &b);
        assert_eq!(
            all.to_text(),
            "crawler-child;main;<impl Foo for Bar>::go 8\n\
             dispatcher;main;crawl 1\n\
             dispatcher;main;crawl;fetch 5\n"
        );
        let mut merged = a.clone();
        merged.merge(&a);
        assert_eq!(merged.samples(), 12);
        assert_eq!(Stacks::parse(&all.to_text()).unwrap(), all);
    }

    #[test]
    fn parse_errors_name_the_line() {
        for bad in ["main;crawl\n", "main;crawl x\n", " 3\n", "a 1\nb -2\n"] {
            let err = Stacks::parse(bad).unwrap_err();
            assert!(err.line >= 1, "{bad:?}: {err}");
        }
        assert_eq!(Stacks::parse("a 1\nb -2\n").unwrap_err().line, 2);
    }

    #[test]
    fn frames_are_sanitised() {
        let mut s = String::new();
        push_frame(&mut s, "<[u8; 4] as Debug>::fmt");
        s.push(';');
        push_frame(&mut s, "");
        s.push(';');
        push_frame(&mut s, "two\nlines");
        assert_eq!(s, "<[u8, 4] as Debug>::fmt;[unknown];two lines");
    }

    #[test]
    fn renders_svg() {
        let s = Stacks::parse("main;crawler_child::pipeline::crawl 5\nmain;idle 2\n").unwrap();
        let svg = String::from_utf8(s.flamegraph_svg("title & <co>", Some("sub"))).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
        assert!(svg.contains("crawler_child::pipeline::crawl"));
        let empty = String::from_utf8(Stacks::new().flamegraph_svg("t <1>", None)).unwrap();
        assert!(empty.contains("<svg") && empty.contains("t &lt;1&gt;") && empty.contains("no CPU samples"));
    }
}
