//! SQL functions of the trace tables: `arg(args, name)`, the argument
//! `name` of an `args` JSON object as text.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Volatility, create_udf};

/// `arg(args, name)`: the value of argument `name` in the JSON object
/// `args` as text (a string as it is, a number or boolean as written),
/// NULL when there is no such argument or it is null.
pub fn arg() -> ScalarUDF {
    create_udf(
        "arg",
        vec![DataType::Utf8, DataType::Utf8],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(arg_values),
    )
}

fn arg_values(columns: &[ColumnarValue]) -> Result<ColumnarValue> {
    let arrays = ColumnarValue::values_to_arrays(columns)?;
    let [objects, names] = arrays.as_slice() else {
        return Err(DataFusionError::Plan(
            "arg(args, name) takes two arguments".into(),
        ));
    };
    let objects = cast(objects, &DataType::Utf8)?;
    let names = cast(names, &DataType::Utf8)?;
    let objects = datafusion::common::cast::as_string_array(&objects)?;
    let names = datafusion::common::cast::as_string_array(&names)?;
    let mut out = StringBuilder::new();
    for i in 0..objects.len() {
        if objects.is_null(i) || names.is_null(i) {
            out.append_null();
            continue;
        }
        out.append_option(lookup(objects.value(i), names.value(i)));
    }
    Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
}

/// The value of `name` in the JSON object `object`, as text.
fn lookup(object: &str, name: &str) -> Option<String> {
    let serde_json::Value::Object(map) = serde_json::from_str(object).ok()? else {
        return None;
    };
    match map.get(name)? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_text() {
        let o = r#"{"fd":3,"path":"/a","ok":true,"n":null,"d":1.5}"#;
        assert_eq!(lookup(o, "fd").as_deref(), Some("3"));
        assert_eq!(lookup(o, "path").as_deref(), Some("/a"));
        assert_eq!(lookup(o, "ok").as_deref(), Some("true"));
        assert_eq!(lookup(o, "d").as_deref(), Some("1.5"));
        assert_eq!(lookup(o, "n"), None);
        assert_eq!(lookup(o, "absent"), None);
        assert_eq!(lookup("not json", "fd"), None);
        assert_eq!(lookup("[1]", "fd"), None);
    }
}
