//! Property tests: every record of every type, with every argument type,
//! survives encode → decode unchanged.

mod common;

use common::{arb_record, encode_all};
use proptest::prelude::*;
use trace_common::fxt::read::{Reader, decode};
use trace_common::fxt::write::{encode, encoded_len};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn record_round_trip(record in arb_record()) {
        let mut out = vec![1, 2, 3];
        let n = encode(&record, &mut out).expect("valid record encodes");
        prop_assert_eq!(n, out.len() - 3);
        prop_assert_eq!(n % 8, 0);
        prop_assert_eq!(encoded_len(&record), Ok(n));
        let bytes = &out[3..];
        let (decoded, len) = decode(bytes).expect("decodes");
        prop_assert_eq!(len, n);
        prop_assert_eq!(&decoded.clone().into_owned(), &record);
        // Re-encoding the decoded record gives the same bytes.
        let mut again = Vec::new();
        encode(&decoded, &mut again).unwrap();
        prop_assert_eq!(&again[..], bytes);
    }

    #[test]
    fn stream_round_trip(records in prop::collection::vec(arb_record(), 0..20)) {
        let (bytes, offsets) = encode_all(&records);
        let got: Vec<_> = Reader::new(&bytes)
            .map(|r| r.map(|(o, r)| (o, r.into_owned())))
            .collect::<Result<_, _>>()
            .expect("no errors");
        let want: Vec<_> = offsets.into_iter().zip(records).collect();
        prop_assert_eq!(got, want);
    }
}
