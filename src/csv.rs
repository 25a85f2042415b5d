//! CSV fields as Python's `csv.writer` writes them, for every CSV file specperf writes (AIPerf's
//! and InferenceX's formats, and our own): a field is quoted, its quotes doubled, when it holds a
//! comma, a quote or a line break (`\r` or `\n`), and written as it is otherwise. Each file keeps
//! its own line ending (`\r\n` where the reader expects Python's default).

/// One field, quoted when it must be.
pub(crate) fn field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// One row's fields, each quoted when it must be, joined by commas (no line ending).
pub(crate) fn row<S: AsRef<str>>(fields: &[S]) -> String {
    let quoted: Vec<String> = fields.iter().map(|f| field(f.as_ref())).collect();
    quoted.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_as_pythons_csv_writer_quotes_them() {
        // Python: csv.writer(buf).writerow(["a", "b,c", 'say "hi"', "l1\nl2", "cr\r", "", " x "])
        let got = row(&["a", "b,c", "say \"hi\"", "l1\nl2", "cr\r", "", " x "]);
        assert_eq!(got, "a,\"b,c\",\"say \"\"hi\"\"\",\"l1\nl2\",\"cr\r\",, x ");
        assert_eq!(field("plain 1.5"), "plain 1.5");
    }
}
