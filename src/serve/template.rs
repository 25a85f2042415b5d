//! `--serve-cmd TEMPLATE` and `--serve-param NAME=v1,v2,...`: the grid of cells and the command
//! each one runs.
//!
//! Placeholders, decided here (vLLM's `bench sweep serve` takes a whole command per cell; a
//! template with parameters writes the grid in one line):
//! - `{NAME}` (`NAME` a letter or `_`, then letters, digits, `_`) is replaced by the cell's value
//!   of `--serve-param NAME`, `{port}` by the free loopback port specperf picked. Values go in as
//!   written, unquoted: quote them in the template when the shell must see one word.
//! - Anything else stays as written, so JSON needs no escaping:
//!   `--speculative-config '{"method":"mtp","num_speculative_tokens":{k}}'` substitutes `{k}`
//!   only. `${NAME}` is the shell's and is left alone.
//! - `{{NAME}}` is a literal `{NAME}` (for a command that wants those braces itself).
//! - `{NAME}` naming neither a parameter nor `port`, or a parameter the template never uses, is
//!   an error: a typo would otherwise run every cell with the same server.

use std::collections::BTreeSet;

/// One `--serve-param NAME=v1,v2,...`: a server setting and its values, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeParam {
    /// The placeholder's name (`k` for `{k}`).
    pub name: String,
    /// The values, one cell each (with the other parameters'), in the order given.
    pub values: Vec<String>,
}

/// `port`: the placeholder specperf fills itself.
pub const PORT: &str = "port";

/// A bad `--serve-cmd` or `--serve-param`; each message names the flag, the value and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `--serve-param` is not `NAME=v1,v2,...`.
    #[error(
        "--serve-param {given:?}: {reason}; write NAME=v1,v2,... (NAME a letter or _ followed by \
         letters, digits or _; values separated by commas)"
    )]
    Param {
        /// The flag's value.
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The same name given twice.
    #[error(
        "--serve-param {name} is given twice: list all its values in one flag, \
         --serve-param {name}=v1,v2"
    )]
    DuplicateParam {
        /// The name.
        name: String,
    },
    /// `{NAME}` in the template that is neither a parameter nor `port`.
    #[error(
        "the --serve-cmd template has {{{name}}}, which is neither a --serve-param nor {{port}}: \
         add --serve-param {name}=v1,v2,... , or write {{{{{name}}}}} for a literal {{{name}}}"
    )]
    UnknownPlaceholder {
        /// The placeholder's name.
        name: String,
    },
    /// A parameter the template never uses: every cell would run the same server.
    #[error(
        "--serve-param {name} is not used by the --serve-cmd template: put {{{name}}} where its \
         value goes, or drop the parameter"
    )]
    UnusedParam {
        /// The parameter.
        name: String,
    },
    /// Two cells would share a directory.
    #[error(
        "cells {first:?} and {second:?} would share the directory {dir:?} (values are written \
         with every character but letters, digits and -_. as _): give values that differ there"
    )]
    NameClash {
        /// The first cell's values.
        first: String,
        /// The second's.
        second: String,
        /// The shared name.
        dir: String,
    },
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses one `--serve-param NAME=v1,v2,...` (the clap value parser).
pub fn parse_param(given: &str) -> Result<ServeParam, TemplateError> {
    let bad = |reason: &str| TemplateError::Param {
        given: given.to_string(),
        reason: reason.to_string(),
    };
    let (name, list) = given
        .split_once('=')
        .ok_or_else(|| bad("there is no `=`"))?;
    let name = name.trim();
    if !is_ident(name) {
        return Err(bad("the name is not an identifier"));
    }
    if name == PORT {
        return Err(bad(
            "`port` is the placeholder specperf fills with the port it picks",
        ));
    }
    let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err(bad("a value is empty"));
    }
    let mut seen = BTreeSet::new();
    if let Some(v) = values.iter().find(|v| !seen.insert(v.as_str())) {
        return Err(bad(&format!("{v} is listed twice")));
    }
    Ok(ServeParam {
        name: name.to_string(),
        values,
    })
}

/// A piece of the template: text as written, or a placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Slot(String),
}

/// Splits the template into text and `{NAME}` placeholders, by the rules in the module doc.
fn pieces(t: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        text.push_str(&rest[..i]);
        let at = &rest[i..];
        let ident_len = |s: &str| {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(s.len())
        };
        // `{{NAME}}`: a literal `{NAME}`.
        if let Some(inner) = at.strip_prefix("{{") {
            let n = ident_len(inner);
            if n > 0 && is_ident(&inner[..n]) && inner[n..].starts_with("}}") {
                text.push('{');
                text.push_str(&inner[..n]);
                text.push('}');
                rest = &inner[n + 2..];
                continue;
            }
        }
        let inner = &at[1..];
        let n = ident_len(inner);
        let shell = text.ends_with('$');
        if n > 0 && is_ident(&inner[..n]) && inner[n..].starts_with('}') && !shell {
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            out.push(Piece::Slot(inner[..n].to_string()));
            rest = &inner[n + 1..];
        } else {
            text.push('{');
            rest = inner;
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

/// A validated `--serve-cmd` template with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
    pieces: Vec<Piece>,
    params: Vec<ServeParam>,
}

/// One cell of the grid: a value of every parameter, in the parameters' order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// `(name, value)` per parameter.
    pub values: Vec<(String, String)>,
}

impl Cell {
    /// `k_2__tp_4`, the cell's name and directory (as sweep points are named); `serve` when no
    /// parameter varies.
    pub fn name(&self) -> String {
        if self.values.is_empty() {
            return "serve".into();
        }
        self.values
            .iter()
            .map(|(n, v)| format!("{n}_{}", crate::fsutil::safe_name(v)))
            .collect::<Vec<_>>()
            .join("__")
    }

    /// The value of parameter `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Template {
    /// Checks `text` against `params`: every placeholder known, every parameter used, no two
    /// parameters of one name, no two cells in one directory.
    pub fn new(text: &str, params: Vec<ServeParam>) -> Result<Template, TemplateError> {
        let mut names = BTreeSet::new();
        for p in &params {
            if !names.insert(p.name.as_str()) {
                return Err(TemplateError::DuplicateParam {
                    name: p.name.clone(),
                });
            }
        }
        let pieces = pieces(text);
        let mut used = BTreeSet::new();
        for p in &pieces {
            if let Piece::Slot(n) = p {
                if n != PORT && !names.contains(n.as_str()) {
                    return Err(TemplateError::UnknownPlaceholder { name: n.clone() });
                }
                used.insert(n.as_str());
            }
        }
        if let Some(p) = params.iter().find(|p| !used.contains(p.name.as_str())) {
            return Err(TemplateError::UnusedParam {
                name: p.name.clone(),
            });
        }
        let t = Template {
            text: text.to_string(),
            pieces,
            params,
        };
        let mut dirs = std::collections::BTreeMap::new();
        for c in t.cells() {
            let show = |c: &Cell| {
                c.values
                    .iter()
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            if let Some(first) = dirs.insert(c.name(), show(&c)) {
                return Err(TemplateError::NameClash {
                    first,
                    second: show(&c),
                    dir: c.name(),
                });
            }
        }
        Ok(t)
    }

    /// The template as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The parameters, in the order given.
    pub fn params(&self) -> &[ServeParam] {
        &self.params
    }

    /// The template has `{port}`: specperf picks the port and targets `http://127.0.0.1:{port}`.
    pub fn uses_port(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Slot(n) if n == PORT))
    }

    /// Every cell: the product of the parameters in the order given, the last changing fastest
    /// (one cell without parameters).
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = vec![Cell { values: Vec::new() }];
        for p in &self.params {
            cells = cells
                .into_iter()
                .flat_map(|c| {
                    p.values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.values.push((p.name.clone(), v.clone()));
                        c
                    })
                })
                .collect();
        }
        cells
    }

    /// The command of `cell`, `{port}` written as `port` (`0` when `None`: the template has no
    /// `{port}`, or the caller only shows the command).
    pub fn command(&self, cell: &Cell, port: Option<u16>) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Slot(n) if n == PORT => out.push_str(&port.unwrap_or(0).to_string()),
                Piece::Slot(n) => out.push_str(cell.get(n).unwrap_or_default()),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ServeParam {
        parse_param(s).unwrap()
    }

    #[test]
    fn params_parse_and_bad_ones_name_the_fix() {
        assert_eq!(
            p("k=1, 3,5"),
            ServeParam {
                name: "k".into(),
                values: vec!["1".into(), "3".into(), "5".into()]
            }
        );
        for (bad, says) in [
            ("k", "no `=`"),
            ("1k=2", "not an identifier"),
            ("k=", "empty"),
            ("k=1,,2", "empty"),
            ("k=1,2,1", "1 is listed twice"),
            ("port=1", "placeholder specperf fills"),
        ] {
            let e = parse_param(bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("NAME=v1,v2"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_grid_is_the_product_in_the_order_given_last_fastest() {
        let t = Template::new(
            "serve --tp {tp} --k {k} --port {port}",
            vec![p("tp=4,8"), p("k=1,2,3")],
        )
        .unwrap();
        let names: Vec<String> = t.cells().iter().map(Cell::name).collect();
        assert_eq!(
            names,
            [
                "tp_4__k_1",
                "tp_4__k_2",
                "tp_4__k_3",
                "tp_8__k_1",
                "tp_8__k_2",
                "tp_8__k_3"
            ]
        );
        assert!(t.uses_port());
        assert_eq!(
            t.command(&t.cells()[4], Some(8123)),
            "serve --tp 8 --k 2 --port 8123"
        );
        let none = Template::new("serve", Vec::new()).unwrap();
        assert_eq!(none.cells().len(), 1);
        assert_eq!(none.cells()[0].name(), "serve");
        assert!(!none.uses_port());
    }

    #[test]
    fn json_braces_shell_variables_and_escapes_stay_literal() {
        let t = Template::new(
            r#"vllm serve ${MODEL} --speculative-config '{"method":"mtp","num_speculative_tokens":{k}}' --x {{k}} {{ {}"#,
            vec![p("k=2")],
        )
        .unwrap();
        assert_eq!(
            t.command(&t.cells()[0], None),
            r#"vllm serve ${MODEL} --speculative-config '{"method":"mtp","num_speculative_tokens":2}' --x {k} {{ {}"#
        );
        assert!(!t.uses_port());
    }

    #[test]
    fn unknown_placeholders_unused_params_and_clashes_are_refused() {
        let e = Template::new("serve --tp {tp} --k {kk}", vec![p("tp=1")]).unwrap_err();
        assert_eq!(e, TemplateError::UnknownPlaceholder { name: "kk".into() });
        let msg = e.to_string();
        assert!(
            msg.contains("{kk}") && msg.contains("--serve-param kk=") && msg.contains("{{kk}}"),
            "{msg}"
        );
        let e = Template::new("serve --tp {tp}", vec![p("tp=1"), p("k=1,2")]).unwrap_err();
        assert_eq!(e, TemplateError::UnusedParam { name: "k".into() });
        assert!(e.to_string().contains("put {k} where"), "{e}");
        // `{{k}}` is a literal: it does not use k.
        assert!(matches!(
            Template::new("serve {{k}}", vec![p("k=1")]),
            Err(TemplateError::UnusedParam { .. })
        ));
        assert!(matches!(
            Template::new("s {k}", vec![p("k=1"), p("k=2")]),
            Err(TemplateError::DuplicateParam { .. })
        ));
        let e = Template::new("s {m}", vec![p("m=a/b,a:b")]).unwrap_err();
        assert!(
            matches!(&e, TemplateError::NameClash { dir, .. } if dir == "m_a_b"),
            "{e}"
        );
    }
}
