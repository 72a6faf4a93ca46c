//! The write-once (WORM) archive layer.
//!
//! An object-store tier in archive mode keeps, next to every copied segment,
//! a *manifest* that lists each object of the segment with its size, SHA-256
//! and the protection it got from the store. Manifests of one partition form
//! a hash chain and each is signed with Ed25519, so an auditor holding only
//! the bucket and the trusted public keys can tell whether anything was
//! altered, removed, reordered, forged or cut off (the last only against an
//! independently recorded tip, a [`WormChainRecord`]).
//!
//! The pieces, in dependency order:
//!
//! - [`digest`]: [`Sha256Digest`] and [`HexBytes`], the hex-in-JSON byte types.
//! - [`manifest`]: the manifest data model and its canonical byte encoding
//!   ([`canonical_manifest_bytes`]).
//! - [`chain`]: chain heads and stamps ([`manifest_head`],
//!   [`next_chain_stamp`]) and the [`WormChainRecord`] the broker publishes.
//! - [`sign`]: Ed25519 sealing and checking ([`SealedManifest`],
//!   [`TrustedManifestKeys`], [`manifest_signing_bytes`]).
//! - [`authenticate`]: chain and signature checks over one partition's
//!   manifests ([`authenticate_archive`]), with no I/O.
//! - [`verify`]: [`verify_archive`], the full audit against an object store.
//! - [`archiver`]: [`WormArchiver`], which writes protected objects and seals
//!   manifests for `S3RemoteStorage`.
//! - [`config`] holds [`WormConfig`].

pub(crate) mod archiver;
pub(crate) mod authenticate;
pub(crate) mod chain;
pub(crate) mod config;
pub(crate) mod digest;
pub(crate) mod error;
pub(crate) mod manifest;
pub(crate) mod sign;
pub(crate) mod verify;

pub use {
    archiver::WormArchiver,
    authenticate::{AuthenticatedArchive, VerifyBreak, authenticate_archive},
    chain::{
        ChainHead, ChainStamp, WORM_CHAIN_RECORD_VERSION, WormChainRecord, manifest_head,
        next_chain_stamp,
    },
    config::WormConfig,
    digest::{HexBytes, Sha256Digest},
    error::WormError,
    manifest::{
        EpochId, EpochSpan, MANIFEST_BODY_DOMAIN, MANIFEST_DOMAIN, MANIFEST_FORMAT_VERSION,
        MANIFEST_SUFFIX, MAX_MANIFEST_BYTES, ManifestBody, ManifestSeq, ObjectEntry,
        ObjectProtectionReport, SegmentIdentity, SegmentManifest, canonical_manifest_bytes,
    },
    sign::{
        ManifestSignature, SealedManifest, TrustedManifestKeys, manifest_signing_bytes,
        verify_manifest_signature,
    },
    verify::{
        ArchiveVerifyReport, OffsetGap, PartitionVerifyReport, VerifyDepth, VerifyRequest,
        verify_archive,
    },
};
