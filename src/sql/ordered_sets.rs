//! `mode() WITHIN GROUP (ORDER BY x)`: the most frequent value.
//!
//! [`super::rewrite`] makes the aggregate `array_agg(x ORDER BY x)` of the
//! values that are not NULL, and [`MostFrequent`] picks from that sorted
//! list the value of its longest run of equal values, the first such run
//! in the order when runs tie, as PostgreSQL's `mode` does.

use datafusion::arrow::array::{make_comparator, Array, ArrayRef};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// The name the rewrite calls.
pub const MOST_FREQUENT: &str = "__tablegate_most_frequent";

/// The most frequent element of a sorted list (NULL for an empty list).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MostFrequent {
    signature: Signature,
}

impl Default for MostFrequent {
    fn default() -> Self {
        MostFrequent {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for MostFrequent {
    fn name(&self) -> &str {
        MOST_FREQUENT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        match types {
            [DataType::List(item)] => Ok(item.data_type().clone()),
            _ => exec_err!("{MOST_FREQUENT} takes a list"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let item = args.return_field.data_type().clone();
        super::functions::each_row(&args, &item, false, |lists| match lists {
            [ScalarValue::List(list)] if list.is_valid(0) => most_frequent(&list.value(0)),
            _ => ScalarValue::try_from(&item),
        })
    }
}

/// The value of the first longest run of equal values in `values`.
fn most_frequent(values: &ArrayRef) -> Result<ScalarValue> {
    if values.is_empty() {
        return ScalarValue::try_from(values.data_type());
    }
    let compare = make_comparator(values.as_ref(), values.as_ref(), SortOptions::default())?;
    let (mut best, mut best_len) = (0, 0);
    let mut start = 0;
    for i in 1..=values.len() {
        if i == values.len() || compare(start, i).is_ne() {
            if i - start > best_len {
                (best, best_len) = (start, i - start);
            }
            start = i;
        }
    }
    ScalarValue::try_from_array(values, best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn the_longest_run_wins_and_the_first_of_equal_runs() {
        let values: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 2, 3, 3, 3, 4]));
        assert_eq!(most_frequent(&values).unwrap(), ScalarValue::Int32(Some(3)));
        let values: ArrayRef = Arc::new(StringArray::from(vec!["b", "b", "a", "a"]));
        assert_eq!(
            most_frequent(&values).unwrap(),
            ScalarValue::Utf8(Some("b".into()))
        );
        let values: ArrayRef = Arc::new(Int32Array::from(Vec::<i32>::new()));
        assert_eq!(most_frequent(&values).unwrap(), ScalarValue::Int32(None));
    }
}
