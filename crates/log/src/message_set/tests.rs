use {
    super::*,
    crate::batch::{BatchHeader, check_batch, decode_records},
    assert2::check,
    bytes::BytesMut,
    kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    },
    proptest::prelude::*,
};

/// One magic 0 message, written out from Kafka's documented schema:
/// offset 5, size 18, CRC, magic 0, attributes 0, key null, value "hi".
const MAGIC_0_MESSAGE: &[u8] = &[
    0, 0, 0, 0, 0, 0, 0, 5, // offset
    0, 0, 0, 16, // size
    0xfd, 0x6e, 0xbd, 0xdb, // CRC-32 of what follows
    0, 0, // magic, attributes
    0xff, 0xff, 0xff, 0xff, // key: null
    0, 0, 0, 2, b'h', b'i', // value
];

/// One magic 1 message: timestamp 0x170 (368), key null, value "hi".
const MAGIC_1_MESSAGE: &[u8] = &[
    0, 0, 0, 0, 0, 0, 0, 0, // offset
    0, 0, 0, 24, // size
    0x89, 0x8e, 0xc5, 0xe3, // CRC-32
    1, 0, // magic, attributes
    0, 0, 0, 0, 0, 0, 1, 0x70, // timestamp
    0xff, 0xff, 0xff, 0xff, // key: null
    0, 0, 0, 2, b'h', b'i', // value
];

fn message(
    magic: i8,
    attributes: i8,
    ts: i64,
    key: Option<&[u8]>,
    value: &[u8],
    offset: i64,
) -> Vec<u8> {
    let mut out = Vec::new();
    write_message(&mut out, offset, magic, attributes, ts, key, Some(value));
    out
}

fn records_of(batch: &Bytes) -> (BatchHeader, Vec<Record>) {
    (check_batch(batch).unwrap(), decode_records(batch).unwrap())
}

#[test]
fn the_documented_messages_parse() {
    let m = parse(Bytes::from_static(MAGIC_0_MESSAGE)).unwrap();
    check!(m.len() == 1);
    check!(m[0].offset == 5);
    check!(m[0].timestamp == -1);
    check!(m[0].key.is_none());
    check!(m[0].value.as_deref() == Some(&b"hi"[..]));
    let m = parse(Bytes::from_static(MAGIC_1_MESSAGE)).unwrap();
    check!(m[0].timestamp == 368);
    // The writer produces exactly the documented bytes.
    check!(message(0, 0, -1, None, b"hi", 5) == MAGIC_0_MESSAGE);
    check!(message(1, 0, 368, None, b"hi", 0) == MAGIC_1_MESSAGE);
}

#[test]
fn uncompressed_messages_become_one_batch() {
    let mut set = MAGIC_0_MESSAGE.to_vec();
    set.extend(message(0, 0, -1, Some(b"k"), b"second", 9));
    let batch = to_batch(Bytes::from(set), &mut (1 << 20)).unwrap();
    let (header, records) = records_of(&batch);
    check!(header.compression() == Some(Compression::None));
    check!(header.record_count == 2);
    check!(header.producer_id == -1);
    check!(records[0].timestamp == -1);
    check!(records[0].offset == 0);
    check!(records[1].offset == 1);
    check!(records[1].key.as_deref() == Some(&b"k"[..]));
    check!(records[1].value.as_deref() == Some(&b"second"[..]));

    let batch = to_batch(Bytes::from_static(MAGIC_1_MESSAGE), &mut (1 << 20)).unwrap();
    let (header, records) = records_of(&batch);
    check!(header.max_timestamp == 368);
    check!(records[0].timestamp == 368);
    check!(records[0].timestamp_type == TimestampType::Creation);
}

fn compress(codec: i8, raw: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        1 => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(raw).unwrap();
            gz.finish().unwrap()
        }
        2 => snap::raw::Encoder::new().compress_vec(raw).unwrap(),
        _ => {
            let mut out = Vec::new();
            let mut e = lz4::EncoderBuilder::new().build(&mut out).unwrap();
            e.write_all(raw).unwrap();
            e.finish().1.unwrap();
            out
        }
    }
}

#[test]
fn compressed_wrappers_keep_their_codec() {
    for (codec, wire) in [
        (1, Compression::Gzip),
        (2, Compression::Snappy),
        (3, Compression::Lz4),
    ] {
        for magic in [0, 1] {
            // Inner offsets: relative in magic 1, anything in magic 0.
            let mut inner = message(magic, 0, 1000, Some(b"a"), b"one", 0);
            inner.extend(message(magic, 0, 1001, None, b"two", 1));
            let wrapper = message(magic, codec, 1001, None, &compress(codec, &inner), 1);
            let mut set = wrapper.clone();
            set.extend(message(magic, 0, 1002, None, b"three", 2));
            let batch = to_batch(Bytes::from(set), &mut (1 << 20)).unwrap();
            let (header, records) = records_of(&batch);
            check!(
                header.compression() == Some(wire),
                "codec {codec} magic {magic}"
            );
            let values: Vec<_> = records.iter().map(|r| r.value.clone().unwrap()).collect();
            check!(values == vec![Bytes::from("one"), Bytes::from("two"), Bytes::from("three")]);
            let stamps: Vec<_> = records.iter().map(|r| r.timestamp).collect();
            if magic == 0 {
                check!(stamps == vec![-1, -1, -1]);
            } else {
                check!(stamps == vec![1000, 1001, 1002]);
            }
        }
    }
}

#[test]
fn a_log_append_time_wrapper_stamps_its_messages() {
    let inner = message(1, 0, 5, None, b"x", 0);
    let wrapper = message(
        1,
        1 | LOG_APPEND_TIME_BIT,
        77,
        None,
        &compress(1, &inner),
        0,
    );
    let (_, records) = records_of(&to_batch(Bytes::from(wrapper), &mut (1 << 20)).unwrap());
    check!(records[0].timestamp == 77);
}

#[test]
fn bad_sets_are_refused() {
    let mut bad_crc = MAGIC_0_MESSAGE.to_vec();
    bad_crc[27] = b'j';
    check!(matches!(
        to_batch(Bytes::from(bad_crc), &mut (1 << 20)),
        Err(MessageSetError::Crc { at: 0, .. })
    ));
    check!(to_batch(Bytes::new(), &mut (1 << 20)) == Err(MessageSetError::Empty));
    let v2 = to_batch(Bytes::from_static(MAGIC_0_MESSAGE), &mut (1 << 20)).unwrap();
    check!(to_batch(v2, &mut (1 << 20)).is_err());
    let zstd = message(1, 4, 0, None, b"whatever", 0);
    check!(to_batch(Bytes::from(zstd), &mut (1 << 20)) == Err(MessageSetError::Codec(4)));
    let inner = message(
        1,
        1,
        0,
        None,
        &compress(1, &message(1, 0, 0, None, b"x", 0)),
        0,
    );
    let nested = message(1, 1, 0, None, &compress(1, &inner), 0);
    check!(to_batch(Bytes::from(nested), &mut (1 << 20)) == Err(MessageSetError::Nested));
    let bomb = message(1, 1, 0, None, &compress(1, &vec![0; 1 << 16]), 0);
    check!(to_batch(Bytes::from(bomb), &mut (1000)) == Err(MessageSetError::TooLarge(1000)));
}

#[test]
fn every_truncation_is_refused() {
    let mut set = MAGIC_0_MESSAGE.to_vec();
    set.extend_from_slice(MAGIC_1_MESSAGE);
    for cut in 1..set.len() {
        if cut == MAGIC_0_MESSAGE.len() {
            continue;
        }
        check!(
            to_batch(Bytes::copy_from_slice(&set[..cut]), &mut (1 << 20)).is_err(),
            "cut at {cut}"
        );
    }
}

fn v2_batch(base: i64, n: usize, control: bool, append_time: bool) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: control,
            control,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: if control { 5 } else { -1 },
            producer_epoch: if control { 0 } else { -1 },
            timestamp_type: if append_time {
                TimestampType::LogAppend
            } else {
                TimestampType::Creation
            },
            offset: base + i as i64,
            sequence: -1 + i as i32,
            timestamp: 1000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{}", base + i as i64))),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Gzip,
        },
    )
    .unwrap();
    let mut out = out.to_vec();
    if append_time {
        // The encoder leaves the timestamp type to the log, as a broker does.
        crate::batch::set_log_append_time(&mut out, 5000);
    }
    out
}

#[test]
fn batches_down_convert_to_both_magics() {
    let mut batches = v2_batch(10, 3, false, false);
    batches.extend(v2_batch(13, 1, true, false));
    batches.extend(v2_batch(14, 2, false, true));
    for magic in [0, 1] {
        let set = from_batches(&batches, magic, 11, 1 << 20);
        let messages = parse(set).unwrap();
        let offsets: Vec<_> = messages.iter().map(|m| m.offset).collect();
        check!(offsets == vec![11, 12, 14, 15], "magic {magic}");
        check!(messages.iter().all(|m| m.magic == magic && m.codec() == 0));
        check!(messages[0].value.as_deref() == Some(&b"v11"[..]));
        check!(messages[0].key.as_deref() == Some(&b"k1"[..]));
        if magic == 1 {
            check!(messages[0].timestamp == 1001);
            check!(messages[0].attributes & LOG_APPEND_TIME_BIT == 0);
            check!(messages[2].attributes & LOG_APPEND_TIME_BIT != 0);
        } else {
            check!(messages[0].timestamp == -1);
        }
    }
}

#[test]
fn down_conversion_stops_at_the_limit_but_keeps_one_message() {
    let batches = v2_batch(0, 5, false, false);
    let one = parse(from_batches(&batches, 1, 0, 1)).unwrap();
    check!(one.len() == 1);
    let all = from_batches(&batches, 1, 0, 1 << 20);
    let three = parse(from_batches(&batches, 1, 0, all.len() * 3 / 5)).unwrap();
    check!(three.len() == 3);
    // A cut-off last batch is left out; garbage yields nothing.
    let cut = from_batches(&batches[..batches.len() - 1], 1, 0, 1 << 20);
    check!(cut.is_empty());
    check!(from_batches(b"garbage", 0, 0, 100).is_empty());
}

#[test]
fn round_trip_through_both_conversions() {
    let batches = v2_batch(0, 4, false, false);
    for magic in [0, 1] {
        let set = from_batches(&batches, magic, 0, 1 << 20);
        let (_, records) = records_of(&to_batch(set, &mut (1 << 20)).unwrap());
        let values: Vec<_> = records.iter().map(|r| r.value.clone().unwrap()).collect();
        check!(
            values
                == vec![
                    Bytes::from("v0"),
                    Bytes::from("v1"),
                    Bytes::from("v2"),
                    Bytes::from("v3")
                ]
        );
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = to_batch(Bytes::from(bytes.clone()), &mut (1 << 16));
        let _ = from_batches(&bytes, 1, 0, 1 << 16);
    }

    #[test]
    fn mutated_messages_never_panic(at in 0usize..64, byte in any::<u8>()) {
        let inner = message(1, 0, 0, None, b"payload", 0);
        let mut set = message(1, 3, 0, None, &compress(3, &inner), 0);
        let i = at % set.len();
        set[i] = byte;
        let _ = to_batch(Bytes::from(set), &mut (1 << 16));
    }
}
