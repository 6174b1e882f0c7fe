package sessionstore

import (
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// nodeOf returns the payload-free public view of e.
func nodeOf(e *entry) Node { return nodeWith(e, e.Preview.String()) }

// nodeWith is nodeOf with the preview's text given.
func nodeWith(e *entry, preview string) Node {
	var ev Event
	fillHeader(&ev, &e.Header)
	return Node{ID: ev.ID, ParentID: ev.ParentID, BranchFrom: ev.BranchFrom, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Size: e.Size, Preview: preview}
}

// nodes appends the nodes of es to dst, their previews sharing one string
// (one allocation for all, not one per node).
func nodes(dst []Node, es []entry) []Node {
	n := 0
	for i := range es {
		n += len(es[i].Preview.Bytes())
	}
	var b []byte
	if n > 0 {
		b = make([]byte, 0, n)
		for i := range es {
			b = append(b, es[i].Preview.Bytes()...)
		}
	}
	all, at := string(b), 0
	for i := range es {
		k := len(es[i].Preview.Bytes())
		dst = append(dst, nodeWith(&es[i], all[at:at+k]))
		at += k
	}
	return dst
}

// sealedPath is the path of sealed chunk n of dir.
func sealedPath(dir string, n uint32) string { return filepath.Join(dir, chunkName(n)+sealedExt) }

// sealedIndex reads the index embedded in sealed chunk n of dir
// (index.ReadSealed); damage is a *CorruptionError naming the sealed
// file.
func sealedIndex(fsys vfs.FS, dir string, n uint32) (es []entry, offsets []int64, err error) {
	es, offsets, err = index.ReadSealed(fsys, sealedPath(dir, n), n)
	return es, offsets, sealedErr(err)
}

// openSealedMeta opens the index embedded in sealed chunk n of dir for
// reading in steps (index.OpenSealed); damage is a *CorruptionError. The
// caller closes it.
func openSealedMeta(fsys vfs.FS, dir string, n uint32) (*sealedMeta, error) {
	m, err := index.OpenSealed(fsys, sealedPath(dir, n), n)
	return m, sealedErr(err)
}

// The index's types (internal/index), under the names the package's
// engine has used for them.
type (
	memIndex   = index.Mem
	indexFile  = index.File
	sealedMeta = index.Sealed
)
