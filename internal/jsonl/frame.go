// Package jsonl frames and scans the checksummed JSON lines that
// sessionstore writes to its chunk and index files.
//
// A framed line is a JSON object whose last member is "crc", followed by a
// newline:
//
//	{"id":"…","kind":"message",…,"crc":"1a2b3c4d"}\n
//	└──────────── covered ─────────┘
//
// The checksum is the CRC-32C (Castagnoli) of every byte before the
// `,"crc":"` suffix, written as exactly eight lower-case hex digits. The
// suffix `,"crc":"XXXXXXXX"}` has a fixed length of 18 bytes, so a reader
// finds it without parsing. The line stays valid JSON: tools that do not
// know the framing see an extra "crc" string member.
//
// CRC-32C detects every error burst of up to 32 bits, so any single changed
// byte in the covered part is caught; a change inside the suffix breaks its
// fixed shape or the strict lower-case hex, and a changed newline merges or
// splits lines, which fails the frame of both.
package jsonl

import (
	"errors"
	"hash/crc32"
)

// The framing constants are part of the on-disk format: never change them.
const (
	suffixStart = `,"crc":"`
	// SuffixLen is the length of the checksum suffix `,"crc":"XXXXXXXX"}`
	// that ends every framed line.
	SuffixLen = len(suffixStart) + 8 + 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by Verify.
var (
	// ErrFrame reports a line that does not start with '{' and end with the
	// checksum suffix. Verify checks the frame and the checksum only; the
	// caller decodes the JSON inside.
	ErrFrame = errors.New("jsonl: line is not a framed JSON object")
	// ErrChecksum reports a line whose checksum does not match its bytes.
	ErrChecksum = errors.New("jsonl: checksum mismatch")
)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

const hexDigits = "0123456789abcdef"

// Seal appends to dst the framed form of obj, a compact JSON object with at
// least one member (it must end in '}' and not be "{}"), and a newline.
func Seal(dst, obj []byte) []byte {
	body := obj[:len(obj)-1]
	sum := Checksum(body)
	dst = append(dst, body...)
	dst = append(dst, suffixStart...)
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(sum>>uint(shift))&0xf])
	}
	return append(dst, '"', '}', '\n')
}

// SealTail frames, in place, the JSON object that buf holds from start on
// (built there by the caller, so no copy is needed): it is Seal(buf[:start],
// buf[start:]) without the second buffer.
func SealTail(buf []byte, start int) []byte {
	body := buf[start : len(buf)-1]
	sum := Checksum(body)
	buf = append(buf[:len(buf)-1], suffixStart...)
	for shift := 28; shift >= 0; shift -= 4 {
		buf = append(buf, hexDigits[(sum>>uint(shift))&0xf])
	}
	return append(buf, '"', '}', '\n')
}

// Verify checks the frame and checksum of line (without its newline).
func Verify(line []byte) error {
	if len(line) < SuffixLen+2 || line[0] != '{' {
		return ErrFrame
	}
	cut := len(line) - SuffixLen
	suffix := line[cut:]
	if string(suffix[:len(suffixStart)]) != suffixStart || suffix[SuffixLen-2] != '"' || suffix[SuffixLen-1] != '}' {
		return ErrFrame
	}
	var want uint32
	for _, c := range suffix[len(suffixStart) : len(suffixStart)+8] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return ErrFrame
		}
		want = want<<4 | uint32(v)
	}
	if Checksum(line[:cut]) != want {
		return ErrChecksum
	}
	return nil
}
