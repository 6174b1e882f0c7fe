// Package seal is the encryption of a store's bytes at rest: an AEAD
// (AES-256-GCM from the standard library) keyed by a session's data key,
// the associated data that binds each sealed piece to its place, and the
// key record that holds a session's data key wrapped under a
// key-encryption key.
//
// Contract:
//
//   - Seal output is nonce (NonceSize bytes, random) || ciphertext || tag
//     (TagSize bytes): Overhead bytes more than the plaintext. Nonces are
//     random, so one data key seals at most 2^32 pieces (NIST SP 800-38D
//     section 8.3); a session's pieces (lines, blocks, blobs) stay far
//     below that, and re-encryption gives a session a new key.
//   - Open returns ErrShort for fewer than Overhead bytes and ErrAuth for
//     any other input that the key did not seal with exactly that
//     associated data: a flipped byte, a wrong key, a piece moved to
//     another place. It never returns unauthenticated bytes.
//   - AAD names a place (a kind, the session, two numbers such as a chunk
//     and an offset, or a block's index): a piece sealed for one place
//     does not open at another.
//   - A key record (key.go) is one line of canonical JSON with a CRC, at
//     most MaxRecordSize bytes; DecodeRecord reads nothing beyond it and
//     reports damage as a *corrupt.Error with the path and offset.
//     WriteRecord replaces the file atomically (internal/durable): when it
//     returns nil the record is durable, and a crash leaves the old record
//     or the new one.
//
// The package never sees a key-encryption key: wrapping and unwrapping
// are the caller's (the root package's KeyProvider).
package seal
