//! Integers as JSON Schema counts them: `2` and `2.0` are the same integer, so a field an
//! OpenAPI 3.1 document declares `integer` takes both (serde alone refuses `2.0`). Use with
//! `#[serde(deserialize_with = "whole::one")]` or `"whole::many"`.

use serde::de::{Deserialize, Deserializer, Error};
use serde_json::Number;

/// One integer, written `2` or `2.0`, within `T`'s range.
pub fn one<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    let number = Number::deserialize(deserializer)?;
    integer(&number).map_err(D::Error::custom)
}

/// An array of integers, each written `2` or `2.0`, within `T`'s range.
pub fn many<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    Vec::<Number>::deserialize(deserializer)?
        .iter()
        .map(integer)
        .collect::<Result<_, _>>()
        .map_err(D::Error::custom)
}

fn integer<T: TryFrom<i128>>(number: &Number) -> Result<T, String> {
    let whole = if let Some(n) = number.as_i64() {
        i128::from(n)
    } else if let Some(n) = number.as_u64() {
        i128::from(n)
    } else {
        match number.as_f64() {
            // Every f64 of magnitude below 2^127 with no fraction is an exact i128.
            Some(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => f as i128,
            _ => return Err(format!("expected an integer, given {number}")),
        }
    };
    T::try_from(whole).map_err(|_| {
        format!(
            "integer {number} is out of range (at most {})",
            std::any::type_name::<T>()
        )
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Counts {
        #[serde(deserialize_with = "super::one")]
        one: u32,
        #[serde(deserialize_with = "super::many")]
        many: Vec<i64>,
    }

    fn parse(json: &str) -> Result<Counts, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn takes_integers_written_as_whole_floats_and_nothing_else() {
        let counts = parse(r#"{"one": 3.0, "many": [1, -2.0, 9007199254740993]}"#).unwrap();
        assert_eq!(counts.one, 3);
        assert_eq!(counts.many, vec![1, -2, 9_007_199_254_740_993]);
        for (json, message) in [
            (
                r#"{"one": 2.5, "many": []}"#,
                "expected an integer, given 2.5",
            ),
            (r#"{"one": -1, "many": []}"#, "out of range"),
            (r#"{"one": 4294967296, "many": []}"#, "out of range"),
            (r#"{"one": 1, "many": [1e30]}"#, "out of range"),
            (r#"{"one": "1", "many": []}"#, "invalid type"),
        ] {
            let error = parse(json).unwrap_err();
            assert!(error.contains(message), "{json}: {error}");
        }
    }
}
