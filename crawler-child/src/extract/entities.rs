//! Character references in the text we extract (`href="?a=1&amp;b=2"`,
//! `<title>Q&amp;A</title>`).
//!
//! HTML decodes them in attribute values and in a title's text, so a
//! browser follows `?a=1&b=2`; a crawler that kept `&amp;` would request
//! another URL than the page links to (and usually a wrong or duplicate
//! page). Neither `lol_html` nor our scanner decodes them, so both hand
//! their raw text here.
//!
//! What is decoded: numeric references (`&#38;`, `&#x26;`, with or without
//! the `;`) and the named ones that matter in URLs and short texts: `amp`,
//! `lt`, `gt`, `quot`, `apos`, `nbsp`. Other named references (HTML has
//! over two thousand) stay as written. In attribute values HTML's legacy
//! rule is kept: `&amp` without `;` followed by `=` or a letter or digit
//! stays literal, so `?a=1&ampx=2` is not rewritten.

/// Named references decoded, with whether HTML also accepts them without
/// the trailing `;` (its legacy list).
const NAMED: [(&str, char, bool); 6] = [
    ("amp", '&', true),
    ("lt", '<', true),
    ("gt", '>', true),
    ("quot", '"', true),
    ("apos", '\'', false),
    ("nbsp", '\u{a0}', true),
];

/// Where the text comes from: HTML decodes a legacy reference without `;`
/// differently in attribute values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Context {
    Attribute,
    Text,
}

/// `raw` with its character references decoded; borrows when there are none.
pub(crate) fn decode(raw: &str, ctx: Context) -> std::borrow::Cow<'_, str> {
    let Some(first) = raw.find('&') else {
        return std::borrow::Cow::Borrowed(raw);
    };
    let mut out = String::with_capacity(raw.len());
    out.push_str(&raw[..first]);
    let mut rest = &raw[first..];
    while let Some(after) = rest.strip_prefix('&') {
        match reference(after, ctx) {
            Some((c, used)) => {
                out.push(c);
                rest = &after[used..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
        let next = rest.find('&').unwrap_or(rest.len());
        out.push_str(&rest[..next]);
        rest = &rest[next..];
    }
    std::borrow::Cow::Owned(out)
}

/// The character a reference stands for and the bytes it took after the
/// `&`, or `None` when the `&` is literal.
fn reference(s: &str, ctx: Context) -> Option<(char, usize)> {
    if let Some(num) = s.strip_prefix('#') {
        return numeric(num).map(|(c, used)| (c, used + 1));
    }
    for (name, c, legacy) in NAMED {
        let Some(tail) = s.strip_prefix(name) else {
            continue;
        };
        if tail.starts_with(';') {
            return Some((c, name.len() + 1));
        }
        let next = tail.bytes().next();
        let blocks =
            ctx == Context::Attribute && next.is_some_and(|b| b == b'=' || b.is_ascii_alphanumeric());
        if legacy && !blocks {
            return Some((c, name.len()));
        }
        return None;
    }
    None
}

/// `&#...`: decimal or (`x`/`X`) hexadecimal digits, an optional `;`.
fn numeric(s: &str) -> Option<(char, usize)> {
    let (digits_at, radix) = match s.as_bytes().first() {
        Some(b'x' | b'X') => (1, 16),
        _ => (0, 10),
    };
    let digits = s[digits_at..]
        .bytes()
        .take_while(|b| b.is_ascii_digit() || (radix == 16 && b.is_ascii_hexdigit()))
        .count();
    if digits == 0 {
        return None;
    }
    let end = digits_at + digits;
    // Any number of digits is valid HTML; past 0x10FFFF it is U+FFFD.
    let value = u32::from_str_radix(&s[digits_at..end], radix).unwrap_or(u32::MAX);
    let c = match value {
        0 => '\u{fffd}',
        v => char::from_u32(v).unwrap_or('\u{fffd}'),
    };
    let used = if s[end..].starts_with(';') { end + 1 } else { end };
    Some((c, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(s: &str) -> String {
        decode(s, Context::Attribute).into_owned()
    }

    #[test]
    fn query_strings_and_texts_are_decoded() {
        assert_eq!(attr("/s?a=1&amp;b=2&amp;c"), "/s?a=1&b=2&c");
        assert_eq!(attr("/x?q=a&#38;b&#x26;c&#X26;d&#38e"), "/x?q=a&b&c&d&e");
        assert_eq!(
            decode("Q&amp;A &lt;3 &quot;x&quot; &apos;y&apos;", Context::Text),
            "Q&A <3 \"x\" 'y'"
        );
        assert_eq!(attr("a&nbsp;b"), "a\u{a0}b");
    }

    #[test]
    fn what_is_not_a_reference_stays() {
        assert!(matches!(
            decode("/plain?a=1", Context::Attribute),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            attr("a & b &unknown; &copy=1 &# &#x; &"),
            "a & b &unknown; &copy=1 &# &#x; &"
        );
        // The legacy rule: `&amp` without `;` before `=` or an alphanumeric.
        assert_eq!(attr("?x=1&amp=2&ampy=3&amp 4"), "?x=1&amp=2&ampy=3& 4");
        assert_eq!(decode("&amp=2", Context::Text), "&=2");
        assert_eq!(attr("&apos"), "&apos");
    }

    #[test]
    fn hostile_numbers_become_the_replacement_character() {
        assert_eq!(
            attr("&#0;&#xD800;&#1114112;&#99999999999999999999;"),
            "\u{fffd}".repeat(4)
        );
        assert_eq!(attr("&#65;&#x1F600;"), "A\u{1F600}");
    }
}
