//! `__consumer_offsets` and `__transaction_state` record keys and values.
#![no_main]

use {
    krabka_broker::coordinator::{group::records as group, txn::records as txn},
    libfuzzer_sys::fuzz_target,
};

fuzz_target!(|data: &[u8]| {
    let _ = group::RecordKey::decode(data);
    let _ = group::OffsetCommitValue::decode(data);
    let _ = group::GroupMetadataValue::decode(data);
    let _ = txn::decode_key(data);
    let _ = txn::TransactionLogValue::decode(data);
});
