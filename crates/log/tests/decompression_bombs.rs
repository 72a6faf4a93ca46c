//! Decompression bombs: a 1 GiB run of zeros compresses to little, and a
//! client may send that as a batch. Each codec's bomb must be refused at the
//! bound without the process ever holding much more than the bound, which a
//! counting allocator measures (this test binary's only test, so nothing
//! else allocates meanwhile).

use {
    kafka_protocol::records::Compression,
    krabka_log::{LogError, compression::inflate},
    std::{
        alloc::{GlobalAlloc, Layout, System},
        io::Write,
        sync::atomic::{AtomicUsize, Ordering},
    },
};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged; only
// the byte counts are recorded.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller's contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const GIB: usize = 1 << 30;
const BOUND: usize = 1 << 20;

/// `total` zeros through `encoder`, a megabyte at a time.
fn zeros_into<W: Write>(mut encoder: W, total: usize) -> W {
    let chunk = vec![0u8; 1 << 20];
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk.len());
        encoder.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
    encoder
}

fn zeros(codec: Compression, total: usize) -> Vec<u8> {
    match codec {
        Compression::Gzip => zeros_into(
            flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()),
            total,
        )
        .finish()
        .unwrap(),
        Compression::Lz4 => {
            let encoder = lz4::EncoderBuilder::new()
                .level(1)
                .build(Vec::new())
                .unwrap();
            let (out, result) = zeros_into(encoder, total).finish();
            result.unwrap();
            out
        }
        Compression::Zstd => zeros_into(zstd::stream::Encoder::new(Vec::new(), 1).unwrap(), total)
            .finish()
            .unwrap(),
        Compression::Snappy => {
            // snappy-java's framing: 32 KiB blocks, each one of zeros.
            let block = snap::raw::Encoder::new()
                .compress_vec(&[0u8; 32 * 1024])
                .unwrap();
            let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
            for _ in 0..total / (32 * 1024) {
                out.extend_from_slice(&u32::try_from(block.len()).unwrap().to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::None => vec![0; total],
    }
}

/// Inflates `data` within `bound`, returning the result and the most bytes
/// allocated meanwhile beyond what was live before.
fn measured(codec: Compression, data: &[u8], bound: usize) -> (Result<usize, LogError>, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let result = inflate(codec, data, bound).map(|b| b.len());
    let peak = PEAK.load(Ordering::Relaxed);
    (result, peak.saturating_sub(before))
}

#[test]
fn every_codec_refuses_a_bomb_within_the_bound() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        // snappy's framing cannot shrink zeros much (about 21:1), so its
        // bomb is smaller; still far past the bound.
        let total = if codec == Compression::Snappy {
            256 << 20
        } else {
            GIB
        };
        let bomb = zeros(codec, total);
        assert!(bomb.len() < total / 16, "{codec:?}: {} bytes", bomb.len());
        let (result, used) = measured(codec, &bomb, BOUND);
        assert!(
            matches!(
                &result,
                Err(LogError::DecompressedTooLarge { limit, .. }) if *limit == BOUND
            ),
            "{codec:?}: {result:?}"
        );
        // The output never outgrows the bound; the rest is the decoder's
        // own buffers.
        assert!(used <= BOUND + (256 << 10), "{codec:?} used {used} bytes");

        // Exactly the bound is accepted.
        let (result, used) = measured(codec, &zeros(codec, BOUND), BOUND);
        assert_eq!(result.unwrap(), BOUND, "{codec:?}");
        assert!(used <= BOUND + (256 << 10), "{codec:?} used {used} bytes");
    }
}
