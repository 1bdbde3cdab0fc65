//! docs/SQL.md documents exactly the columns the tables declare.
//!
//! Its `## Conventions` section has the table of the columns every table
//! begins with ([`TRACE_COLUMNS`]); under `## Tables`, each table has a
//! section `### <table>` whose table lists its other columns, one row each:
//! `` | `name` | type | meaning | ``, the type as Arrow names it, followed
//! by `, null` when the column can be null.

use datafusion::arrow::datatypes::{DataType, Field};

use super::{TRACE_COLUMNS, all, schema};

/// The documentation.
const SQL_MD: &str = include_str!("../../../docs/SQL.md");

/// A documented column: its name and type, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DocColumn {
    name: String,
    ty: String,
}

/// The lines of the section of `markdown` under `heading` (a whole line,
/// such as `## Tables`), up to the next heading of the same level or
/// higher, out of fenced code blocks.
fn section<'a>(markdown: &'a str, heading: &str) -> Vec<&'a str> {
    let level = heading.chars().take_while(|&c| c == '#').count();
    let mut out = Vec::new();
    let mut inside = false;
    let mut fenced = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            let l = line.chars().take_while(|&c| c == '#').count();
            if line.trim_end() == heading {
                inside = true;
                continue;
            }
            if inside && l <= level {
                break;
            }
        }
        if inside && !fenced {
            out.push(line);
        }
    }
    out
}

/// The rows of the column tables (those whose header is `| column | type |
/// meaning |`) in `lines`, in order.
fn column_rows(lines: &[&str]) -> Vec<DocColumn> {
    let mut out = Vec::new();
    let mut in_table = false;
    for line in lines {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line
            .trim_matches('|')
            .splitn(3, '|')
            .map(str::trim)
            .collect();
        if cells.first() == Some(&"column") && cells.get(1) == Some(&"type") {
            in_table = true;
            continue;
        }
        if !in_table || cells.first().is_some_and(|c| c.starts_with("---")) {
            continue;
        }
        let name = cells[0];
        let name = name
            .strip_prefix('`')
            .and_then(|n| n.strip_suffix('`'))
            .unwrap_or_else(|| panic!("docs/SQL.md: a column's name is not in backticks: {line}"));
        out.push(DocColumn {
            name: name.to_owned(),
            ty: cells.get(1).copied().unwrap_or_default().to_owned(),
        });
    }
    out
}

/// `t` as docs/SQL.md writes it: Arrow's name of the type, a list's item
/// and a struct's fields in parentheses (`` `name` Type `` each).
fn doc_type(t: &DataType) -> String {
    match t {
        DataType::List(item) => format!("List({})", doc_type(item.data_type())),
        DataType::Struct(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|f| format!("`{}` {}", f.name(), doc_type(f.data_type())))
                .collect();
            format!("Struct({})", fields.join(", "))
        }
        t => format!("{t:?}"),
    }
}

/// `field` as docs/SQL.md documents it.
fn documented(field: &Field) -> DocColumn {
    let null = if field.is_nullable() { ", null" } else { "" };
    DocColumn {
        name: field.name().clone(),
        ty: format!("{}{null}", doc_type(field.data_type())),
    }
}

/// What differs between the columns `doc` documents for `what` and the
/// columns `code` declares: missing, extra, out of order or of another
/// type.
fn differences(what: &str, doc: &[DocColumn], code: &[DocColumn]) -> Vec<String> {
    let names = |c: &[DocColumn]| c.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    let (doc_names, code_names) = (names(doc), names(code));
    let mut out = Vec::new();
    let missing: Vec<&String> = code_names
        .iter()
        .filter(|n| !doc_names.contains(n))
        .collect();
    let extra: Vec<&String> = doc_names
        .iter()
        .filter(|n| !code_names.contains(n))
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "{what}: columns missing from docs/SQL.md: {missing:?}"
        ));
    }
    if !extra.is_empty() {
        out.push(format!(
            "{what}: columns in docs/SQL.md that the table does not have: {extra:?}"
        ));
    }
    let mut twice: Vec<&String> = doc_names
        .iter()
        .enumerate()
        .filter(|(i, n)| doc_names[..*i].contains(n))
        .map(|(_, n)| n)
        .collect();
    twice.dedup();
    if !twice.is_empty() {
        out.push(format!(
            "{what}: columns documented more than once in docs/SQL.md: {twice:?}"
        ));
    }
    // The columns both have, in each one's order.
    let common = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter().filter(|n| b.contains(n)).cloned().collect()
    };
    let (doc_order, code_order) = (
        common(&doc_names, &code_names),
        common(&code_names, &doc_names),
    );
    if twice.is_empty() && doc_order != code_order {
        out.push(format!(
            "{what}: columns out of order in docs/SQL.md: documented {doc_order:?}, declared {code_order:?}"
        ));
    }
    for d in doc {
        if let Some(c) = code.iter().find(|c| c.name == d.name)
            && c.ty != d.ty
        {
            out.push(format!(
                "{what}.{}: documented as `{}`, declared `{}`",
                d.name, d.ty, c.ty
            ));
        }
    }
    out
}

#[test]
fn sql_md_documents_exactly_the_declared_columns() {
    let mut problems = Vec::new();

    // The columns every table begins with.
    let leading = column_rows(&section(SQL_MD, "## Conventions"));
    let first = all().remove(0);
    let code: Vec<DocColumn> = schema(first.as_ref()).fields()[..TRACE_COLUMNS.len()]
        .iter()
        .map(|f| documented(f))
        .collect();
    problems.extend(differences("## Conventions", &leading, &code));

    // Each table's section, and no section for a table there is not.
    let tables = section(SQL_MD, "## Tables");
    let documented_tables: Vec<&str> = tables
        .iter()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .collect();
    let registered: Vec<&str> = all().iter().map(|t| t.name()).collect();
    for name in &documented_tables {
        if !registered.contains(name) {
            problems.push(format!(
                "docs/SQL.md documents a table `{name}` that there is not"
            ));
        }
    }
    for table in all() {
        let name = table.name();
        if !documented_tables.contains(&name) {
            problems.push(format!(
                "docs/SQL.md has no section `### {name}` under `## Tables`"
            ));
            continue;
        }
        let doc = column_rows(&section(&tables.join("\n"), &format!("### {name}")));
        let code: Vec<DocColumn> = table.columns().iter().map(documented).collect();
        problems.extend(differences(name, &doc, &code));
    }

    assert!(
        problems.is_empty(),
        "docs/SQL.md disagrees with the tables' declarations:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn declarations_describe_every_column() {
    for table in all() {
        let declared: Vec<&str> = table.column_docs().iter().map(|c| c.name).collect();
        let fields: Vec<String> = table.columns().iter().map(|f| f.name().clone()).collect();
        assert_eq!(declared, fields, "{}", table.name());
        let full = schema(table.as_ref());
        assert_eq!(
            full.fields().len(),
            TRACE_COLUMNS.len() + declared.len(),
            "{}",
            table.name()
        );
        for c in TRACE_COLUMNS.iter().chain(table.column_docs()) {
            assert!(
                !c.doc.is_empty() && !c.doc.contains('\n') && c.doc.trim() == c.doc,
                "{}.{}: {:?}",
                table.name(),
                c.name,
                c.doc
            );
        }
    }
}

#[test]
fn the_parser_finds_differences() {
    let md = "\
# Doc

## Conventions

| column | type | meaning |
|---|---|---|
| `trace_id` | Utf8 | Id. |

## Tables

### t

Text | with a bar.

| column | type | meaning |
|---|---|---|
| `a` | UInt64 | A, with `|` inside. |
| `c` | Int32, null | C. |

```sql
### not a heading
```

### u

| column | type | meaning |
|---|---|---|
| `x` | Utf8 | X. |

## Examples

| column | type | meaning |
|---|---|---|
| `no` | Utf8 | Not a table's. |
";
    let col = |name: &str, ty: &str| DocColumn {
        name: name.into(),
        ty: ty.into(),
    };
    assert_eq!(
        column_rows(&section(md, "## Conventions")),
        [col("trace_id", "Utf8")]
    );
    let tables = section(md, "## Tables").join("\n");
    let t = column_rows(&section(&tables, "### t"));
    assert_eq!(t, [col("a", "UInt64"), col("c", "Int32, null")]);
    assert_eq!(column_rows(&section(&tables, "### u")), [col("x", "Utf8")]);
    let code = [col("a", "UInt64"), col("b", "Utf8"), col("c", "Int32")];
    assert_eq!(
        differences("t", &t, &code),
        [
            "t: columns missing from docs/SQL.md: [\"b\"]",
            "t.c: documented as `Int32, null`, declared `Int32`",
        ]
    );
    let swapped = [col("c", "Int32, null"), col("a", "UInt64")];
    assert_eq!(
        differences("t", &t, &swapped),
        [
            "t: columns out of order in docs/SQL.md: documented [\"a\", \"c\"], declared [\"c\", \"a\"]"
        ]
    );
    assert_eq!(
        differences(
            "t",
            &[col("a", "UInt64"), col("a", "UInt64")],
            &[col("a", "UInt64")]
        ),
        ["t: columns documented more than once in docs/SQL.md: [\"a\"]"]
    );
    assert_eq!(
        differences("t", &t, &[col("a", "UInt64")]),
        ["t: columns in docs/SQL.md that the table does not have: [\"c\"]"]
    );
    let stack = Field::new(
        "stack",
        DataType::List(std::sync::Arc::new(Field::new(
            "item",
            DataType::Struct(
                vec![
                    Field::new("function", DataType::Utf8, false),
                    Field::new("mapping", DataType::Utf8, false),
                ]
                .into(),
            ),
            false,
        ))),
        true,
    );
    assert_eq!(
        documented(&stack).ty,
        "List(Struct(`function` Utf8, `mapping` Utf8)), null"
    );
}
