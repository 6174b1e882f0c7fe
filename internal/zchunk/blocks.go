package zchunk

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Block types of a zstd frame (RFC 8878, 3.1.1.2).
const (
	BlockRaw        = 0
	BlockRLE        = 1
	BlockCompressed = 2
)

// FrameBlocks parses frame, one zstd frame with a content checksum, and
// returns the size of its frame header and the type of each of its blocks,
// after checking that the blocks and the checksum end the frame exactly.
// It reads the block headers only: the tests use it to show what the
// encoders store (raw blocks where compression does not pay).
func FrameBlocks(frame []byte) (headerSize int, types []int, err error) {
	var h zstd.Header
	if err := h.Decode(frame); err != nil {
		return 0, nil, err
	}
	if !h.HasCheckSum {
		return 0, nil, errors.New("zstd frame without a content checksum")
	}
	pos := h.HeaderSize
	for {
		if pos+3 > len(frame) {
			return 0, nil, fmt.Errorf("zstd block header at %d past the frame's %d bytes", pos, len(frame))
		}
		bh := int(frame[pos]) | int(frame[pos+1])<<8 | int(frame[pos+2])<<16
		last, typ, size := bh&1 == 1, bh>>1&3, bh>>3
		if typ == BlockRLE {
			size = 1 // an RLE block holds the byte it repeats
		}
		types = append(types, typ)
		pos += 3 + size
		if last {
			break
		}
	}
	if pos+4 != len(frame) {
		return 0, nil, fmt.Errorf("zstd frame of %d bytes: blocks and checksum end at %d", len(frame), pos+4)
	}
	return h.HeaderSize, types, nil
}
