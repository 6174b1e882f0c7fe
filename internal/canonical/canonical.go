// Package canonical writes and reads the one text form the store gives an
// event id and a record digest in its files: the lower-case 8-4-4-4-12
// form of a UUID, and "sha256:" and 64 lower-case hex digits. A reader
// takes that form only, so that a value has one encoding and a changed
// byte never reads as the same value.
//
// The functions are pure: they read their arguments, append to dst or
// return a value, and write nothing else.
package canonical

import (
	"errors"

	"github.com/google/uuid"
)

// UUIDLen is the length of a UUID's canonical form.
const UUIDLen = 36

// DigestPrefix names the hash of a record digest; part of the format.
const DigestPrefix = "sha256:"

// DigestHexLen is the number of hex digits after DigestPrefix.
const DigestHexLen = 64

// AppendUUID appends the canonical lower-case form of id.
func AppendUUID(dst []byte, id uuid.UUID) []byte {
	var buf [UUIDLen]byte
	hexEncode(buf[0:8], id[0:4])
	buf[8] = '-'
	hexEncode(buf[9:13], id[4:6])
	buf[13] = '-'
	hexEncode(buf[14:18], id[6:8])
	buf[18] = '-'
	hexEncode(buf[19:23], id[8:10])
	buf[23] = '-'
	hexEncode(buf[24:], id[10:])
	return append(dst, buf[:]...)
}

func hexEncode(dst, src []byte) {
	const digits = "0123456789abcdef"
	for i, b := range src {
		dst[i*2] = digits[b>>4]
		dst[i*2+1] = digits[b&0xf]
	}
}

// uuidDigits are the offsets of the 32 hex digits in the canonical form.
var uuidDigits = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// ParseUUID parses the canonical 36-character lower-case form only: the
// form the store writes. Anything else is an error.
func ParseUUID(b []byte) (uuid.UUID, error) {
	var id uuid.UUID
	if len(b) != UUIDLen || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return id, errors.New("uuid is not in canonical form")
	}
	bad := byte(0)
	for i, at := range uuidDigits {
		hi, lo := hexValue[b[at]], hexValue[b[at+1]]
		bad |= hi | lo
		id[i] = hi<<4 | lo&0x0f
	}
	if bad&0x80 != 0 {
		return uuid.Nil, errors.New("uuid is not in canonical lower-case form")
	}
	return id, nil
}

// AppendDigest appends "sha256:<hex>".
func AppendDigest(dst []byte, d [32]byte) []byte {
	dst = append(dst, DigestPrefix...)
	var buf [DigestHexLen]byte
	hexEncode(buf[:], d[:])
	return append(dst, buf[:]...)
}

// ParseDigestHex parses the DigestHexLen lower-case hex digits that
// follow DigestPrefix (b holds them alone). Anything else is an error.
func ParseDigestHex(b []byte) ([32]byte, error) {
	var d [32]byte
	if len(b) != DigestHexLen {
		return d, errors.New("truncated digest")
	}
	bad := byte(0)
	for i := range d {
		hi, lo := hexValue[b[2*i]], hexValue[b[2*i+1]]
		bad |= hi | lo
		d[i] = hi<<4 | lo&0x0f
	}
	if bad&0x80 != 0 {
		return [32]byte{}, errors.New("digest is not lower-case hex")
	}
	return d, nil
}

// hexValue maps a lower-case hex digit to its value and every other byte
// to 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()
