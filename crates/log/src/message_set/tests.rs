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

fn v2_batch(
    base: i64,
    n: usize,
    control: bool,
    append_time: bool,
    compression: Compression,
) -> Vec<u8> {
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
            compression,
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

const NONE: Compression = Compression::None;

#[test]
fn uncompressed_batches_down_convert_to_both_magics() {
    let mut batches = v2_batch(10, 3, false, false, NONE);
    batches.extend(v2_batch(13, 1, true, false, NONE));
    batches.extend(v2_batch(14, 2, false, true, NONE));
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
            check!(messages[2].timestamp == 5000);
        } else {
            check!(messages[0].timestamp == -1);
        }
    }
}

#[test]
fn down_conversion_stops_at_the_limit_but_keeps_one_message() {
    let batches = v2_batch(0, 5, false, false, NONE);
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

const CODECS: [(i8, Compression); 3] = [
    (1, Compression::Gzip),
    (2, Compression::Snappy),
    (3, Compression::Lz4),
];

/// The messages of a down-converted set with the offsets a client reads
/// (Kafka's `AbstractLegacyRecordBatch`): a magic 1 wrapper's inner offsets
/// are relative to its first message, its own offset is its last one's.
fn client_view(set: Bytes) -> Vec<(Message, i64)> {
    let mut out = Vec::new();
    for m in parse(set).unwrap() {
        if m.codec() == 0 {
            let offset = m.offset;
            out.push((m, offset));
            continue;
        }
        let inner = parse(
            codec::inflate(m.codec(), m.magic, m.value.as_deref().unwrap(), 1 << 20).unwrap(),
        )
        .unwrap();
        let last = inner.last().unwrap().offset;
        for i in inner {
            let offset = if m.magic == MAGIC_V1 {
                m.offset - last + i.offset
            } else {
                i.offset
            };
            out.push((i, offset));
        }
    }
    out
}

#[test]
fn a_compressed_batch_becomes_one_wrapper_of_its_codec() {
    for (id, codec) in CODECS {
        for magic in [0, 1] {
            let batch = v2_batch(10, 3, false, false, codec);
            // All records of a compressed batch, even before the fetch offset.
            let set = from_batches(&batch, magic, 11, 1 << 20);
            let wrappers = parse(set.clone()).unwrap();
            check!(wrappers.len() == 1, "{codec:?} magic {magic}");
            let w = &wrappers[0];
            check!(w.magic == magic);
            check!(w.codec() == id);
            check!(w.offset == 12);
            check!(w.key.is_none());
            check!(w.attributes & LOG_APPEND_TIME_BIT == 0);
            check!(w.timestamp == if magic == 1 { 1002 } else { -1 });
            let inner =
                parse(codec::inflate(id, magic, w.value.as_deref().unwrap(), 1 << 20).unwrap())
                    .unwrap();
            let raw: Vec<_> = inner.iter().map(|m| m.offset).collect();
            check!(
                raw == if magic == 1 {
                    vec![0, 1, 2]
                } else {
                    vec![10, 11, 12]
                }
            );
            check!(inner.iter().all(|m| m.codec() == 0 && m.magic == magic));
            let seen: Vec<_> = client_view(set)
                .into_iter()
                .map(|(m, offset)| (offset, m.key.unwrap(), m.value.unwrap(), m.timestamp))
                .collect();
            let stamp = |t: i64| if magic == 1 { t } else { -1 };
            check!(
                seen == vec![
                    (10, Bytes::from("k0"), Bytes::from("v10"), stamp(1000)),
                    (11, Bytes::from("k1"), Bytes::from("v11"), stamp(1001)),
                    (12, Bytes::from("k2"), Bytes::from("v12"), stamp(1002)),
                ]
            );
        }
    }
}

#[test]
fn compressed_round_trip_keeps_records_offsets_and_codec() {
    for (_, codec) in CODECS {
        for magic in [0, 1] {
            let batch = v2_batch(20, 4, false, false, codec);
            let (_, original) = records_of(&Bytes::from(batch.clone()));
            let set = from_batches(&batch, magic, 20, 1 << 20);
            let offsets: Vec<_> = client_view(set.clone()).iter().map(|(_, o)| *o).collect();
            check!(offsets == vec![20, 21, 22, 23], "{codec:?} magic {magic}");
            let (header, back) = records_of(&to_batch(set, &mut (1 << 20)).unwrap());
            check!(header.compression() == Some(codec));
            check!(header.record_count == 4);
            for (b, o) in back.iter().zip(&original) {
                check!(b.key == o.key);
                check!(b.value == o.value);
                check!(b.timestamp == if magic == 1 { o.timestamp } else { -1 });
                // Offsets in the batch are the log's to assign again.
                check!(b.offset - back[0].offset == o.offset - original[0].offset);
            }
        }
    }
}

#[test]
fn a_log_append_time_batch_stamps_its_wrapper_and_messages() {
    for (id, codec) in CODECS {
        let batch = v2_batch(0, 2, false, true, codec);
        let set = from_batches(&batch, 1, 0, 1 << 20);
        let w = &parse(set.clone()).unwrap()[0];
        check!(w.attributes == id | LOG_APPEND_TIME_BIT);
        check!(w.timestamp == 5000);
        for (m, _) in client_view(set.clone()) {
            check!(m.attributes == LOG_APPEND_TIME_BIT);
            check!(m.timestamp == 5000);
        }
        let (_, back) = records_of(&to_batch(set, &mut (1 << 20)).unwrap());
        check!(back.iter().all(|r| r.timestamp == 5000));
    }
}

#[test]
fn wrappers_count_whole_against_the_limit_and_control_batches_are_skipped() {
    let mut batches = v2_batch(0, 3, false, false, Compression::Gzip);
    batches.extend(v2_batch(3, 1, true, false, Compression::Gzip));
    batches.extend(v2_batch(4, 2, false, false, Compression::Lz4));
    let all = parse(from_batches(&batches, 1, 0, 1 << 20)).unwrap();
    check!(
        all.iter()
            .map(|m| (m.offset, m.codec()))
            .collect::<Vec<_>>()
            == vec![(2, 1), (5, 3)]
    );
    // The first wrapper always goes, even past the limit; no second.
    check!(parse(from_batches(&batches, 1, 0, 1)).unwrap().len() == 1);
    // zstd cannot be written in the old formats: the conversion ends there.
    let mut with_zstd = v2_batch(0, 1, false, false, Compression::Gzip);
    with_zstd.extend(v2_batch(1, 1, false, false, Compression::Zstd));
    with_zstd.extend(v2_batch(2, 1, false, false, NONE));
    check!(
        parse(from_batches(&with_zstd, 0, 0, 1 << 20))
            .unwrap()
            .len()
            == 1
    );
}

#[test]
fn round_trip_through_both_conversions() {
    let batches = v2_batch(0, 4, false, false, NONE);
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
