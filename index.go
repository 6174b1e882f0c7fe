package sessionstore

import (
	"encoding/binary"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// nodeOf returns the payload-free public view of e, its preview shown
// as v says.
func nodeOf(e *entry, v previews) Node { return nodeWith(e, string(v.appendText(nil, e))) }

// nodeWith is nodeOf with the preview's text given.
func nodeWith(e *entry, preview string) Node {
	var ev Event
	fillHeader(&ev, &e.Header)
	return Node{ID: ev.ID, ParentID: ev.ParentID, BranchFrom: ev.BranchFrom, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Size: e.Size, Preview: preview}
}

// previews says how the previews of one session's entries are shown: in
// clear for a plain session (enc false); for an encrypted one, a sealed
// preview opened under key (encrypt.go) and nothing for any other (no
// key given, a preview that does not open, an entry rebuilt from its
// chunk line, which has none).
type previews struct {
	enc  bool
	key  *sessionKey
	lost *sync.Map // texts made for entries without a preview (fillPrefix)
}

// appendText appends e's preview text as v shows it to dst.
func (v previews) appendText(dst []byte, e *entry) []byte {
	if !v.enc {
		return append(dst, e.Preview.Bytes()...) // none for a sealed one
	}
	if v.key == nil {
		return dst
	}
	if !e.Preview.Sealed() {
		if v.lost != nil {
			if t, ok := v.lost.Load(e.ID); ok {
				return append(dst, t.([]byte)...)
			}
		}
		return dst
	}
	return v.key.appendPreview(dst, e.ID, &e.Preview)
}

// stale reports whether a preview of es is sealed under a key generation
// v's key does not hold (entries read before a Reencrypt).
func (v previews) stale(es []entry) bool {
	if v.key == nil {
		return false
	}
	for i := range es {
		if raw := es[i].Preview.SealedBytes(); len(raw) >= 4 {
			if _, ok := v.key.ciphers[binary.BigEndian.Uint32(raw)]; !ok {
				return true
			}
		}
	}
	return false
}

// previewsOf returns how session's previews are shown given its key as
// recordKey returned it (key, err): in clear for a plain session, opened
// for an encrypted one; a key that could not be had (no KeyProvider, a
// key-encryption key it lacks, a session.json that did not read) shows
// none, since the previews of a session the Store cannot tell plain may
// be sealed.
func previewsOf(key *sessionKey, err error) previews {
	return previews{enc: key != nil || err != nil, key: key}
}

// nodes appends the nodes of es to dst, their previews shown as v says
// and sharing one string per run of entries (one allocation for many
// nodes, not one per node). Sealed previews are opened on every core
// for a long es (about half a microsecond each).
func nodes(dst []Node, es []entry, v previews) []Node {
	if !v.enc || len(es) < 2*previewRun {
		return appendNodes(dst, es, v)
	}
	runs := (len(es) + previewRun - 1) / previewRun
	parts := make([][]Node, runs)
	forEach(runs, runtime.GOMAXPROCS(0), func(_, r int) {
		parts[r] = appendNodes(nil, es[r*previewRun:min(len(es), (r+1)*previewRun)], v)
	})
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// previewRun is how many entries nodes gives one core.
const previewRun = 2048

// appendNodes is nodes on one core.
func appendNodes(dst []Node, es []entry, v previews) []Node {
	n := 0
	if v.enc {
		n = len(es) * sealedPreviewText
	} else {
		for i := range es {
			n += len(es[i].Preview.Bytes())
		}
	}
	var b []byte
	if n > 0 {
		b = make([]byte, 0, n)
	}
	ends := make([]int, len(es))
	for i := range es {
		b = v.appendText(b, &es[i])
		ends[i] = len(b)
	}
	all, at := string(b), 0
	for i := range es {
		dst = append(dst, nodeWith(&es[i], all[at:ends[i]]))
		at = ends[i]
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
