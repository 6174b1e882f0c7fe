// Package zchunk stores a sealed chunk (one that will never be written
// again) compressed with zstd, in a form that keeps random access by
// logical offset: the byte offsets of the plain chunk file, which is what
// index locations name. The file can also carry metadata: opaque bytes
// given to [Write] and returned by [Reader.Meta] (the store keeps the
// chunk's index lines there, so a sealed chunk describes itself).
//
// # Format
//
// The plain bytes are cut into blocks at line boundaries: every block but
// possibly the last ends with a newline, and a block holds at most
// [BlockSize] bytes unless a single line is longer, in which case that line
// is a block of its own. Each block is compressed as an independent zstd
// frame (RFC 8878) with its content checksum, so a reader decompresses only
// the blocks a read overlaps and every decompressed byte is checked. The
// frames are followed by the meta frame, the frame table and a fixed-size
// footer, all inside one zstd skippable frame:
//
//	offset 0
//	+--------------------------------+
//	| zstd frame 0   (block 0)       |  content checksum on
//	+--------------------------------+
//	| zstd frame 1   (block 1)       |
//	+--------------------------------+
//	| ...                            |
//	+--------------------------------+  framesEnd (= end of the last frame)
//	| skippable frame header, 8 B    |  u32 SkippableMagic,
//	|                                |  u32 metaLen+tableLen+FooterSize
//	+--------------------------------+  framesEnd + 8 (= metaOff if metaLen > 0)
//	| meta frame, metaLen B          |  the metadata as one zstd frame,
//	| (absent if metaLen = 0)        |  content checksum on
//	+--------------------------------+  tableOff = framesEnd + 8 + metaLen
//	| frame table, EntrySize B each  |  one entry per frame, in file order:
//	|                                |   0 u64 compressed offset
//	|                                |   8 u64 compressed length
//	|                                |  16 u64 logical offset
//	|                                |  24 u64 logical length
//	|                                |  32 u32 CRC-32C of the frame's bytes
//	+--------------------------------+  tableOff + tableLen
//	| footer, FooterSize (68) B      |   0 u64 tableOff
//	|                                |   8 u64 tableLen
//	|                                |  16 u64 logical size
//	|                                |  24 u32 CRC-32C (Castagnoli) of the table
//	|                                |  28 u32 CRC-32C of the meta frame's bytes
//	|                                |  32 u64 metaOff
//	|                                |  40 u64 metaLen (the meta frame's length)
//	|                                |  48 u64 metadata length (plain)
//	|                                |  56 u32 Version
//	|                                |  60 [8]byte Magic "SSZCHUNK"
//	+--------------------------------+  end of file
//
// All integers are little-endian. Because the meta frame, the table and
// the footer sit in a skippable frame, the whole file is also a valid zstd
// stream: "zstd -d" (or any conforming decoder) turns it back into the
// plain chunk, without the metadata.
//
// Empty metadata has no meta frame: metaOff, metaLen, the metadata length
// and the meta frame's CRC-32C are all zero, and the table follows the
// skippable frame header. Non-empty metadata is at most [MaxMetaSize]
// bytes.
//
// Part of the on-disk format, never to change within a Version: [Magic],
// [Version], [FooterSize], [EntrySize], [SkippableMagic], [MaxWindow],
// [MaxMetaSize], the layout above, CRC-32C (Castagnoli) for the table, the
// frames and the meta frame, and the rule that every frame, the meta frame
// included, carries its zstd content checksum. [BlockSize] is not part of
// the format: it is the writer's choice, and a reader accepts blocks of any
// size.
//
// An empty input has no frames: the file is the skippable frame alone
// (76 bytes without metadata: the header, an empty table and the footer).
//
// # Validation
//
// [Open] reads only the footer, the skippable frame header and the table,
// and checks that every field agrees with the others and with the file
// size: the magic, the version, tableOff + tableLen + FooterSize = file
// size, the metadata fields (all zero without metadata; otherwise metaOff
// + metaLen = tableOff, and a metadata length from 1 to MaxMetaSize that
// a zstd frame of metaLen bytes can decode to), the skippable frame header
// (8 bytes before the meta frame, or before the table without one), the
// table's CRC, frames that tile [0, framesEnd) and blocks that tile
// [0, size) in order, no empty frame or block, and no block longer than a
// zstd frame of its compressed length can decode to. A frame is checked
// when a read first needs it: its bytes must match the table's CRC-32C,
// its header must name no dictionary and carry a content checksum, a
// content size in the header must be the block's length (zstd omits it
// below 256 bytes), and the decompressed block must have that length and
// match the content checksum. [Reader.Meta] checks the meta frame the same
// way, against the CRC-32C and the metadata length in the footer. Any
// failure is a [*FormatError] naming the file and the offset of the
// damaged part.
//
// Every byte of the file is thus covered: the frames by their CRC-32C in
// the table, the meta frame by its CRC-32C in the footer, the table by the
// CRC in the footer, the skippable header and the footer by the
// cross-checks. A damaged footer field cannot go unnoticed: Open catches a
// change to any of them except the meta frame's CRC-32C and the metadata
// length, which it cannot check without reading the meta frame, and which
// Meta checks. The frame CRCs are what make every change detectable: zstd
// alone ignores a few bits (a header's unused bit, the window size of a
// small frame, slack in entropy tables), and a change there would
// decompress to the right bytes unnoticed. The zstd content checksum in
// turn guards against encoder or decoder bugs.
//
// # Shared codec state
//
// Compression uses one package-level zstd.Encoder through EncodeAll, and
// decompression one package-level zstd.Decoder through DecodeAll; both
// calls are safe for concurrent use. The encoder runs at most GOMAXPROCS
// compressions at a time and the decoder at most GOMAXPROCS decompressions
// (further callers wait), so memory stays bounded however many chunks are
// open; a Reader needs no decoder of its own. Neither starts goroutines, and
// both are created on first use. Write decompresses every frame it made,
// the meta frame included, and compares it with its input before writing
// anything, so an encoder bug cannot replace a chunk with a file that does
// not read back.
//
// The encoder runs at its default level (about zstd level 3): on agent
// transcripts the next level gains about 1% at half the speed, the
// strongest about 4% at a tenth. It entropy codes the literals of a zstd
// block in which it finds too few matches to pay
// (WithAllLitEntropyCompression), which the default level alone stores
// raw: base64 image data is stored at about 0.75 of its size rather than
// 0.91 to 1.00 (BenchmarkWriteClaudeCode), and text as before. A zstd
// block (at most 128 KiB) is written compressed only when that is shorter
// than the block, and raw otherwise, so a frame is never larger than its
// block by more than the frame's own overhead: the frame header (6 to 10
// bytes: magic number, frame header descriptor, window descriptor for a
// block of up to 1 KiB or over MaxWindow, content size), 3 bytes of block
// header per 128 KiB and the 4-byte content checksum; 14 bytes for a block
// of BlockSize (TestIncompressibleFrames).
//
// A Reader keeps the block it decompressed last, so a run of reads inside
// one block (adjacent records) decompresses it once. Blocks end at line
// ends, so a read of one line decompresses at most one frame. Meta keeps
// nothing: each call reads and decompresses the meta frame.
package zchunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// On-disk format constants (see the package comment).
const (
	// Magic ends every file.
	Magic = "SSZCHUNK"
	// Version is the format version written in the footer; Open refuses
	// any other. Version 1, the pre-release format without metadata, is
	// refused too: there is no migration.
	Version = 2
	// FooterSize is the size of the footer that ends the file.
	FooterSize = 68
	// EntrySize is the size of one frame table entry.
	EntrySize = 36
	// MaxWindow is the largest zstd window a frame may declare (a frame
	// whose block is at most MaxWindow long may be single-segment, with the
	// block's length as its window). 8 MiB is what RFC 8878 recommends every
	// decoder support.
	MaxWindow = 8 << 20
	// SkippableMagic is the zstd skippable frame magic number of the frame
	// holding the table and footer (0x184D2A50 to 0x184D2A5F are skippable;
	// this package writes and requires this one).
	SkippableMagic = 0x184D2A5E
	// MaxMetaSize is the largest metadata (plain, before compression) a
	// file may hold. It bounds what Meta allocates for a damaged footer.
	MaxMetaSize = 1 << 30
	// MaxBlockSize is the largest block a file may hold: one line of the
	// store's longest (a record of 1 GiB and its line's other members).
	// With the meta frame's and each frame's compressed length bounded by
	// what zstd makes of its plain length at worst (stored raw), it bounds
	// what a read allocates, whatever a damaged file's footer and table
	// claim.
	MaxBlockSize = 1<<30 + 1<<20
)

// compressBound is the most bytes a zstd frame of n plain bytes takes:
// stored raw, in blocks of 128 KiB with 3 bytes of header each, with its
// header and content checksum; and room to spare.
func compressBound(n uint64) uint64 { return n + n>>10 + 1<<10 }

// skipHeaderSize is the size of a zstd skippable frame header: magic and
// payload length, both u32.
const skipHeaderSize = 8

// BlockSize is the most plain data a block holds unless it is one longer
// line. It is the writer's choice, not part of the format.
const BlockSize = 64 << 10

// maxBlockPerByte bounds how much a zstd frame can decode to per
// compressed byte: a block decodes to at most 128 KiB and takes at least 4
// bytes (3 of header, 1 of content).
const maxBlockPerByte = (128 << 10) / 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors wrapped by FormatError.Err, for errors.Is.
var (
	ErrTruncated          = errors.New("file is truncated")
	ErrBadMagic           = errors.New("bad magic number (not a compressed chunk, or truncated)")
	ErrUnsupportedVersion = errors.New("unsupported format version")
	ErrTableChecksum      = errors.New("frame table checksum mismatch")
	ErrBadTable           = errors.New("inconsistent footer or frame table")
	ErrBadFrame           = errors.New("damaged frame")
	ErrBadMeta            = errors.New("damaged meta frame")
)

// FormatError reports a compressed chunk that is not in the format: Offset
// is the byte offset in the compressed file of the damaged part (the
// footer or one of its fields, the skippable frame header, the table or
// one of its entries, or the start of a frame or of the meta frame).
type FormatError struct {
	Path   string
	Offset int64
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("zchunk: %s: offset %d: %v", e.Path, e.Offset, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

var encoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderCRC(true),
		zstd.WithWindowSize(MaxWindow),
		zstd.WithAllLitEntropyCompression(true),
		zstd.WithEncoderConcurrency(0), // GOMAXPROCS
	)
	if err != nil {
		panic("zchunk: " + err.Error()) // only for invalid static options
	}
	return e
})

var decoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // GOMAXPROCS
		zstd.WithDecoderMaxWindow(MaxWindow),
		// DecodeAll writes at most cap(dst)-len(dst) bytes: a damaged
		// frame cannot make a read allocate more than its block's length.
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		panic("zchunk: " + err.Error())
	}
	return d
})

// entry is one frame table entry.
type entry struct {
	compOff, compLen int64
	logOff, logLen   int64
	crc              uint32 // CRC-32C of the compressed bytes
}

// blocks cuts src into blocks at line boundaries (see the package comment)
// and returns the end offset of each.
func blocks(src []byte, blockSize int) []int {
	var ends []int
	start, end := 0, 0
	for end < len(src) {
		lineEnd := len(src)
		if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
			lineEnd = end + i + 1
		}
		if end > start && lineEnd-start > blockSize {
			ends = append(ends, end)
			start = end
		}
		end = lineEnd
	}
	if end > start {
		ends = append(ends, end)
	}
	return ends
}

// encode returns the compressed form of src, cut into blocks of at most
// blockSize bytes, with meta as its metadata.
func encode(src, meta []byte, blockSize int) ([]byte, error) {
	if len(meta) > MaxMetaSize {
		return nil, fmt.Errorf("zchunk: metadata too large (%d bytes, at most %d)", len(meta), MaxMetaSize)
	}
	enc, dec := encoder(), decoder()
	ends := blocks(src, blockSize)
	prev := 0
	for _, end := range ends {
		if end-prev > MaxBlockSize {
			return nil, fmt.Errorf("zchunk: a line of %d bytes (a block holds at most %d)", end-prev, MaxBlockSize)
		}
		prev = end
	}
	out := make([]byte, 0, len(src)/4+skipHeaderSize+len(meta)/4+EntrySize*len(ends)+FooterSize)
	table := make([]byte, 0, EntrySize*len(ends))
	start := 0
	for _, end := range ends {
		block := src[start:end]
		compOff := len(out)
		out = enc.EncodeAll(block, out)
		// Check the frame before it replaces the plain chunk: an encoder
		// bug must not lose data.
		check, err := dec.DecodeAll(out[compOff:], make([]byte, 0, len(block)))
		if err != nil || !bytes.Equal(check, block) {
			return nil, fmt.Errorf("zchunk: compressed block at %d does not decompress to its input (%v)", start, err)
		}
		table = binary.LittleEndian.AppendUint64(table, uint64(compOff))
		table = binary.LittleEndian.AppendUint64(table, uint64(len(out)-compOff))
		table = binary.LittleEndian.AppendUint64(table, uint64(start))
		table = binary.LittleEndian.AppendUint64(table, uint64(len(block)))
		table = binary.LittleEndian.AppendUint32(table, crc32.Checksum(out[compOff:], castagnoli))
		start = end
	}
	var metaFrame []byte
	if len(meta) > 0 {
		metaFrame = enc.EncodeAll(meta, nil)
		check, err := dec.DecodeAll(metaFrame, make([]byte, 0, len(meta)))
		if err != nil || !bytes.Equal(check, meta) {
			return nil, fmt.Errorf("zchunk: compressed metadata does not decompress to its input (%v)", err)
		}
	}
	payload := uint64(len(metaFrame)) + uint64(len(table)) + FooterSize
	if payload > math.MaxUint32 {
		return nil, fmt.Errorf("zchunk: meta frame and frame table too large (%d and %d bytes)", len(metaFrame), len(table))
	}
	out = binary.LittleEndian.AppendUint32(out, SkippableMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32(payload))
	metaOff := 0 // zero without metadata
	if len(metaFrame) > 0 {
		metaOff = len(out)
	}
	out = append(out, metaFrame...)
	tableOff := len(out)
	out = append(out, table...)
	out = binary.LittleEndian.AppendUint64(out, uint64(tableOff))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(table)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(src)))
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(table, castagnoli))
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(metaFrame, castagnoli))
	out = binary.LittleEndian.AppendUint64(out, uint64(metaOff))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(metaFrame)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(meta)))
	out = binary.LittleEndian.AppendUint32(out, Version)
	out = append(out, Magic...)
	return out, nil
}

// Write stores src, the plain bytes of a sealed chunk, compressed at dst,
// replacing any file there, with meta as its metadata: opaque bytes, at
// most MaxMetaSize, that [Reader.Meta] returns (empty or nil for none; src
// may be empty too). It writes the temporary file dst+".tmp",
// syncs and closes it, renames it to dst and syncs dst's directory: when
// Write returns nil the file is durable under its final name. On an error
// before the rename the temporary file is removed (best effort; a crash
// can still leave it behind, and the next Write truncates it). An error
// from the final directory sync means dst exists but may not survive a
// crash.
func Write(fsys vfs.FS, dst string, src, meta []byte, perm fs.FileMode) error {
	return write(fsys, dst, src, meta, perm, BlockSize)
}

// WriteBlocks is Write with blocks of at most blockSize bytes (unless a
// single line is longer) instead of BlockSize: larger blocks compress
// better, and a read then decompresses more to reach one line. A
// blockSize below 1 selects BlockSize.
func WriteBlocks(fsys vfs.FS, dst string, src, meta []byte, perm fs.FileMode, blockSize int) error {
	if blockSize < 1 {
		blockSize = BlockSize
	}
	return write(fsys, dst, src, meta, perm, blockSize)
}

func write(fsys vfs.FS, dst string, src, meta []byte, perm fs.FileMode, blockSize int) (err error) {
	data, err := encode(src, meta, blockSize)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("zchunk: create %s: %w", tmp, err)
	}
	renamed := false
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil && !renamed {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("zchunk: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("zchunk: sync %s: %w", tmp, err)
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("zchunk: close %s: %w", tmp, cerr)
	}
	if err := fsys.Rename(tmp, dst); err != nil {
		return fmt.Errorf("zchunk: rename %s: %w", tmp, err)
	}
	renamed = true
	dir := filepath.Dir(dst)
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("zchunk: sync directory %s: %w", dir, err)
	}
	return nil
}

// Reader reads the logical (plain) bytes of a compressed chunk. It is safe
// for concurrent use.
type Reader struct {
	f     vfs.File
	path  string
	size  int64
	table []entry

	// The meta frame, from the footer: all zero without metadata.
	metaOff, metaLen int64  // in the file
	metaSize         int64  // decompressed
	metaCRC          uint32 // CRC-32C of the compressed bytes

	mu        sync.Mutex
	cacheIdx  int    // frame held in cacheData, -1 if none
	cacheData []byte // never modified once cached: readers copy from it unlocked

	cache    *Cache    // frames read in part, shared with other Readers; nil: none
	kept     *keptFile // the kept file f belongs to (Cache.Open); nil: f is the Reader's own
	released bool      // Close was called (under mu)

	decodes atomic.Int64 // frames decompressed, for tests
}

// SetCache makes the Reader keep the frames it decompresses for a read of
// part of their block in c, and look for every frame there first (see
// Cache). Call it before the Reader's first read.
func (r *Reader) SetCache(c *Cache) { r.cache = c }

// Open opens a compressed chunk and validates its footer and frame table.
// A file not in the format gives a *FormatError; I/O errors are returned
// as they are.
func Open(fsys vfs.FS, path string) (*Reader, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	r, err := open(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func open(f vfs.File, path string) (*Reader, error) {
	bad := func(off int64, err error) error { return &FormatError{Path: path, Offset: off, Err: err} }
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fileSize := fi.Size()
	// The footer, or as much of its end as the file holds: a file of
	// another version, which may be shorter than this version's smallest,
	// is reported as such rather than as truncated. Every version ends
	// with the version number and the magic.
	tailLen := min(fileSize, FooterSize)
	var foot [FooterSize]byte
	if err := readFull(f, foot[FooterSize-tailLen:], fileSize-tailLen); err != nil {
		return nil, fileErr(path, fileSize-tailLen, err)
	}
	le := binary.LittleEndian
	hasMagic := tailLen >= 12 && string(foot[60:68]) == Magic
	if v := le.Uint32(foot[56:60]); hasMagic && v != Version {
		return nil, bad(fileSize-12, fmt.Errorf("%w: %d (want %d)", ErrUnsupportedVersion, v, Version))
	}
	if fileSize < skipHeaderSize+FooterSize {
		return nil, bad(0, fmt.Errorf("%w: %d bytes, less than the %d of an empty chunk", ErrTruncated, fileSize, skipHeaderSize+FooterSize))
	}
	footOff := fileSize - FooterSize
	if !hasMagic {
		return nil, bad(footOff+60, fmt.Errorf("%w: %q", ErrBadMagic, foot[60:68]))
	}
	tableOff, tableLen, size := le.Uint64(foot[0:8]), le.Uint64(foot[8:16]), le.Uint64(foot[16:24])
	tableCRC, metaCRC := le.Uint32(foot[24:28]), le.Uint32(foot[28:32])
	metaOff, metaLen, metaSize := le.Uint64(foot[32:40]), le.Uint64(foot[40:48]), le.Uint64(foot[48:56])
	if tableLen%EntrySize != 0 || tableLen > uint64(footOff) || tableOff != uint64(footOff)-tableLen || tableOff < skipHeaderSize {
		return nil, bad(footOff, fmt.Errorf("%w: table at %d, %d bytes, in a file of %d bytes", ErrBadTable, tableOff, tableLen, fileSize))
	}
	if size > math.MaxInt64 {
		return nil, bad(footOff+16, fmt.Errorf("%w: logical size %d", ErrBadTable, size))
	}
	// The meta frame fills [metaOff, tableOff) if there is one: the
	// frames end before its skippable frame header.
	var framesEnd int64
	if metaLen == 0 {
		switch {
		case metaCRC != 0:
			return nil, bad(footOff+28, fmt.Errorf("%w: no meta frame, but its CRC-32C is %08x", ErrBadTable, metaCRC))
		case metaOff != 0 || metaSize != 0:
			return nil, bad(footOff+32, fmt.Errorf("%w: no meta frame, but at %d, %d bytes plain", ErrBadTable, metaOff, metaSize))
		}
		framesEnd = int64(tableOff) - skipHeaderSize
	} else {
		if metaLen > tableOff-skipHeaderSize || metaOff != tableOff-metaLen {
			return nil, bad(footOff+32, fmt.Errorf("%w: meta frame at %d, %d bytes, table at %d", ErrBadTable, metaOff, metaLen, tableOff))
		}
		hi, lo := bits.Mul64(metaLen, maxBlockPerByte)
		if metaSize == 0 || metaSize > MaxMetaSize || hi == 0 && metaSize > lo || metaLen > compressBound(metaSize) {
			return nil, bad(footOff+48, fmt.Errorf("%w: metadata length %d in a meta frame of %d bytes (at most %d)", ErrBadTable, metaSize, metaLen, MaxMetaSize))
		}
		framesEnd = int64(metaOff) - skipHeaderSize
	}
	// The skippable frame header and the table, in one read if they are
	// adjacent and the table is small (every table the store writes is);
	// a larger table is read a piece at a time (bigTable).
	var head [skipHeaderSize]byte
	var table []byte
	small := tableLen <= maxWholeTable
	if small {
		buf := make([]byte, skipHeaderSize+tableLen)
		table = buf[skipHeaderSize:]
		if metaLen == 0 {
			if err := readFull(f, buf, framesEnd); err != nil {
				return nil, fileErr(path, framesEnd, err)
			}
			copy(head[:], buf)
		} else {
			if err := readFull(f, head[:], framesEnd); err != nil {
				return nil, fileErr(path, framesEnd, err)
			}
			if err := readFull(f, table, int64(tableOff)); err != nil {
				return nil, fileErr(path, int64(tableOff), err)
			}
		}
	} else if err := readFull(f, head[:], framesEnd); err != nil {
		return nil, fileErr(path, framesEnd, err)
	}
	if m, n := le.Uint32(head[0:4]), le.Uint32(head[4:8]); m != SkippableMagic || uint64(n) != metaLen+tableLen+FooterSize {
		return nil, bad(framesEnd, fmt.Errorf("%w: skippable frame header %#x, %d bytes (want %#x, %d)", ErrBadTable, m, n, SkippableMagic, metaLen+tableLen+FooterSize))
	}
	var bt *bigTable
	if !small {
		bt = &bigTable{f: f, path: path, off: int64(tableOff), len: int64(tableLen)}
		got, err := bt.checksum()
		if err != nil {
			return nil, err
		}
		if got != tableCRC {
			return nil, bad(int64(tableOff), fmt.Errorf("%w: %08x, footer says %08x", ErrTableChecksum, got, tableCRC))
		}
	} else if got := crc32.Checksum(table, castagnoli); got != tableCRC {
		return nil, bad(int64(tableOff), fmt.Errorf("%w: %08x, footer says %08x", ErrTableChecksum, got, tableCRC))
	}
	// The entries, each checked before it is kept: a table that claims
	// more than its file holds fails at its first bad entry, having cost
	// the memory of the good ones.
	var entries []entry
	if small {
		entries = make([]entry, 0, len(table)/EntrySize)
	}
	var compEnd, logEnd uint64
	for i := 0; i < int(tableLen/EntrySize); i++ {
		var e []byte
		if small {
			e = table[i*EntrySize:]
		} else {
			var err error
			if e, err = bt.entry(i); err != nil {
				return nil, err
			}
		}
		compOff, compLen := le.Uint64(e[0:]), le.Uint64(e[8:])
		logOff, logLen := le.Uint64(e[16:]), le.Uint64(e[24:])
		frameCRC := le.Uint32(e[32:])
		entryOff := int64(tableOff) + int64(i)*EntrySize
		switch {
		case compOff != compEnd || logOff != logEnd:
			return nil, bad(entryOff, fmt.Errorf("%w: frame %d at %d (logical %d), previous ends at %d (logical %d)", ErrBadTable, i, compOff, logOff, compEnd, logEnd))
		case compLen == 0 || logLen == 0:
			return nil, bad(entryOff, fmt.Errorf("%w: frame %d is empty", ErrBadTable, i))
		case compLen > uint64(framesEnd)-compOff:
			return nil, bad(entryOff, fmt.Errorf("%w: frame %d (%d bytes at %d) overruns the table", ErrBadTable, i, compLen, compOff))
		case logLen > size-logOff:
			return nil, bad(entryOff, fmt.Errorf("%w: block %d (%d bytes at %d) overruns the logical size %d", ErrBadTable, i, logLen, logOff, size))
		case logLen > MaxBlockSize || compLen > compressBound(logLen):
			return nil, bad(entryOff, fmt.Errorf("%w: frame %d of %d bytes for a block of %d (at most %d)", ErrBadTable, i, compLen, logLen, uint64(MaxBlockSize)))
		}
		if hi, lo := bits.Mul64(compLen, maxBlockPerByte); hi == 0 && logLen > lo {
			return nil, bad(entryOff, fmt.Errorf("%w: frame %d of %d bytes cannot hold %d", ErrBadTable, i, compLen, logLen))
		}
		entries = append(entries, entry{int64(compOff), int64(compLen), int64(logOff), int64(logLen), frameCRC})
		compEnd, logEnd = compOff+compLen, logOff+logLen
	}
	if compEnd != uint64(framesEnd) || logEnd != size {
		return nil, bad(int64(tableOff), fmt.Errorf("%w: frames end at %d (logical %d), want %d (logical %d)", ErrBadTable, compEnd, logEnd, framesEnd, size))
	}
	return &Reader{
		f: f, path: path, size: int64(size), table: entries, cacheIdx: -1,
		metaOff: int64(metaOff), metaLen: int64(metaLen), metaSize: int64(metaSize), metaCRC: metaCRC,
	}, nil
}

// maxWholeTable is the largest frame table read in one piece: that of a
// chunk of gigabytes in the store's 256 KiB blocks.
const maxWholeTable = 1 << 20

// bigTable reads a frame table larger than maxWholeTable a piece at a
// time.
type bigTable struct {
	f        vfs.File
	path     string
	off, len int64
	buf      []byte
	bufAt    int64 // table offset of buf[0]
}

// checksum returns the table's CRC-32C.
func (t *bigTable) checksum() (uint32, error) {
	var crc uint32
	buf := make([]byte, maxWholeTable)
	for at := int64(0); at < t.len; {
		p := buf[:min(int64(len(buf)), t.len-at)]
		if err := readFull(t.f, p, t.off+at); err != nil {
			return 0, fileErr(t.path, t.off+at, err)
		}
		crc = crc32.Update(crc, castagnoli, p)
		at += int64(len(p))
	}
	return crc, nil
}

// entry returns entry i, read in pieces of whole entries as i grows.
func (t *bigTable) entry(i int) ([]byte, error) {
	at := int64(i) * EntrySize
	if at < t.bufAt || at+EntrySize > t.bufAt+int64(len(t.buf)) {
		n := min(int64(maxWholeTable/EntrySize*EntrySize), t.len-at)
		if cap(t.buf) < int(n) {
			t.buf = make([]byte, n)
		}
		t.buf, t.bufAt = t.buf[:n], at
		if err := readFull(t.f, t.buf, t.off+at); err != nil {
			return nil, fileErr(t.path, t.off+at, err)
		}
	}
	return t.buf[at-t.bufAt:], nil
}

// readFull reads len(p) bytes at off.
func readFull(f vfs.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fileErr turns a short read into a *FormatError (the file is shorter than
// its footer says) and returns other errors as they are.
func fileErr(path string, off int64, err error) error {
	if err == io.ErrUnexpectedEOF {
		return &FormatError{Path: path, Offset: off, Err: ErrTruncated}
	}
	return fmt.Errorf("zchunk: read %s at %d: %w", path, off, err)
}

// Size returns the logical size: the length of the plain chunk.
func (r *Reader) Size() int64 { return r.size }

// ReadAt implements io.ReaderAt over the logical bytes. It decompresses
// only the frames that overlap [off, off+len(p)) and keeps the last one
// decompressed, so reads of adjacent records decompress each frame once.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("zchunk: %s: negative offset %d", r.path, off)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= r.size {
		return 0, io.EOF
	}
	// The first frame whose block ends after off.
	i := sort.Search(len(r.table), func(i int) bool { return r.table[i].logOff+r.table[i].logLen > off })
	n := 0
	for n < len(p) && i < len(r.table) {
		if e := r.table[i]; e.logOff == off+int64(n) && e.logLen <= int64(len(p)-n) {
			// The whole block is wanted: decompress it in place.
			dst := p[n : n+int(e.logLen) : n+int(e.logLen)]
			if err := r.frameInto(i, dst); err != nil {
				return n, err
			}
			n += len(dst)
			i++
			continue
		}
		data, err := r.frame(i)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], data[off+int64(n)-r.table[i].logOff:])
		i++
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Block returns the logical range [start, end) of the block that holds
// offset off, or (Size, Size) when off is at or past the end. A read of
// whole blocks decompresses them straight into the caller's buffer.
func (r *Reader) Block(off int64) (start, end int64) {
	i := sort.Search(len(r.table), func(i int) bool { return r.table[i].logOff+r.table[i].logLen > off })
	if i == len(r.table) {
		return r.size, r.size
	}
	return r.table[i].logOff, r.table[i].logOff + r.table[i].logLen
}

// frame returns the decompressed block of frame i, keeping the last one
// for the next call.
func (r *Reader) frame(i int) ([]byte, error) {
	r.mu.Lock()
	if r.cacheIdx == i {
		data := r.cacheData
		r.mu.Unlock()
		return data, nil
	}
	r.mu.Unlock()
	data, err := r.decode(i, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.cacheIdx, r.cacheData = i, data
	r.mu.Unlock()
	return data, nil
}

// frameInto decompresses the block of frame i into dst, which has exactly
// its length (and capacity).
func (r *Reader) frameInto(i int, dst []byte) error {
	r.mu.Lock()
	cached := r.cacheIdx == i
	data := r.cacheData
	r.mu.Unlock()
	if cached {
		copy(dst, data)
		return nil
	}
	_, err := r.decode(i, dst[:0])
	return err
}

// decode reads, checks and decompresses frame i, into dst's array if it
// has room.
func (r *Reader) decode(i int, dst []byte) ([]byte, error) {
	e := r.table[i]
	bad := func(err error) error {
		return &FormatError{Path: r.path, Offset: e.compOff, Err: fmt.Errorf("%w: frame %d: %w", ErrBadFrame, i, err)}
	}
	key := cacheKey{r.path, e.compOff}
	var id fileID // the kept file's identity, checked when this Reader was handed out
	if r.kept != nil {
		id = r.kept.id
		if data := r.cache.getKept(key, id); int64(len(data)) == e.logLen && data != nil {
			if cap(dst) > 0 {
				return append(dst[:0], data...), nil
			}
			return data, nil // shared: never modified
		}
	}
	var comp []byte
	if r.cache != nil {
		// Compared with a kept frame's, then dropped or kept with the
		// frame decompressed from it: a buffer of the pool, not zeroed.
		comp = compBuf(e.compLen)
	} else {
		comp = make([]byte, e.compLen)
	}
	if err := readFull(r.f, comp, e.compOff); err != nil {
		return nil, fileErr(r.path, e.compOff, err)
	}
	if data := r.cache.get(key, comp, id); int64(len(data)) == e.logLen && data != nil {
		putCompBuf(comp)
		if cap(dst) > 0 {
			return append(dst[:0], data...), nil
		}
		return data, nil // shared: never modified
	}
	if got := crc32.Checksum(comp, castagnoli); got != e.crc {
		return nil, bad(fmt.Errorf("CRC-32C %08x, table says %08x", got, e.crc))
	}
	data, err := decodeFrame(dst, 0, comp, e.logLen, "table")
	if err != nil {
		return nil, bad(err)
	}
	r.decodes.Add(1)
	if cap(dst) == 0 {
		// A read of part of the block (a record, not a run of whole
		// blocks read into the caller's buffer): the kind read again.
		if r.cache != nil && cap(comp) > len(comp) {
			// A larger buffer of the pool: kept as it is, it would hold
			// more memory than the cache counts for it.
			exact := make([]byte, len(comp))
			copy(exact, comp)
			putCompBuf(comp)
			comp = exact
		}
		r.cache.put(key, comp, data, id)
	} else if r.cache != nil {
		putCompBuf(comp) // a whole block into the caller's buffer: comp is kept nowhere
	}
	return data, nil
}

// decodeFrame decompresses comp, which must be one zstd frame with a
// content checksum and no dictionary, of n bytes (the length that source,
// "table" or "footer", records), into dst's array if it has room, else
// into a new one with spare bytes of room beyond n. Nothing is allocated
// before the frame header agrees with n.
func decodeFrame(dst []byte, spare int64, comp []byte, n int64, source string) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(comp); err != nil {
		return nil, err
	}
	switch {
	case h.Skippable || h.DictionaryID != 0:
		return nil, errors.New("skippable frame or dictionary")
	case !h.HasCheckSum:
		return nil, errors.New("no content checksum")
	case h.HasFCS && h.FrameContentSize != uint64(n):
		return nil, fmt.Errorf("content size %d, %s says %d", h.FrameContentSize, source, n)
	}
	if int64(cap(dst)) < n {
		dst = make([]byte, 0, n+spare)
	}
	data, err := decoder().DecodeAll(comp, dst[:0])
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("decompressed %d bytes, %s says %d", len(data), source, n)
	}
	return data, nil
}

// Meta returns the metadata stored with the chunk (the meta argument of
// [Write]), or nil without error if there is none. Each call reads the
// meta frame, checks its CRC-32C, decompresses it and checks its length
// and content checksum, and returns a new slice the caller may keep and
// modify. A damaged meta frame, or a damaged CRC-32C or metadata length in
// the footer, gives a *FormatError at the meta frame's offset wrapping
// ErrBadMeta; a file cut short since Open gives one wrapping ErrTruncated.
// Meta is safe for concurrent use, with itself and with ReadAt.
func (r *Reader) Meta() ([]byte, error) {
	return r.MetaWith(new(MetaBuffer))
}

// MetaBuffer holds the memory that [Reader.MetaWith] reuses from one call
// to the next, so that reading the metadata of many chunks in turn
// allocates for the largest only. The zero value is ready to use.
type MetaBuffer struct {
	comp, data []byte
}

// MetaWith is [Reader.Meta] reading into b's memory: the slice it returns
// is valid until the next call with b. A MetaBuffer serves one call at a
// time.
func (r *Reader) MetaWith(b *MetaBuffer) ([]byte, error) {
	if r.metaLen == 0 {
		return nil, nil
	}
	bad := func(err error) error {
		return &FormatError{Path: r.path, Offset: r.metaOff, Err: fmt.Errorf("%w: %w", ErrBadMeta, err)}
	}
	if int64(cap(b.comp)) < r.metaLen {
		b.comp = make([]byte, r.metaLen+r.metaLen/8)
	}
	comp := b.comp[:r.metaLen]
	if err := readFull(r.f, comp, r.metaOff); err != nil {
		return nil, fileErr(r.path, r.metaOff, err)
	}
	if got := crc32.Checksum(comp, castagnoli); got != r.metaCRC {
		return nil, bad(fmt.Errorf("CRC-32C %08x, footer says %08x", got, r.metaCRC))
	}
	// Room for the next chunk's metadata, which is likely a little longer.
	data, err := decodeFrame(b.data, r.metaSize/8, comp, r.metaSize, "footer")
	if err != nil {
		return nil, bad(err)
	}
	b.data = data
	return data, nil
}

// MetaSize returns the length of the metadata, as the footer records it
// (Meta checks it), without reading the meta frame.
func (r *Reader) MetaSize() int64 { return r.metaSize }

// Close closes the file, or, for a file a Cache keeps open, releases it.
func (r *Reader) Close() error {
	r.mu.Lock()
	r.cacheIdx, r.cacheData = -1, nil
	k, again := r.kept, r.released
	r.released = true
	r.mu.Unlock()
	switch {
	case k == nil:
		return r.f.Close()
	case again:
		// The kept file is another Reader's too: released once.
		return &fs.PathError{Op: "close", Path: r.path, Err: fs.ErrClosed}
	}
	return r.cache.release(k)
}
