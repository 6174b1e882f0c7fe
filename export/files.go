package export

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// Content is the content of a workspace file that an exported snapshot
// manifest names (see "Workspace snapshots" in the package doc): the
// "files" member of the manifest's event line, one element per distinct
// digest the manifest lists.
type Content struct {
	Digest string `json:"digest"` // "sha256:<hex>" of the content
	Size   int64  `json:"size"`   // its length in bytes
	// Data is the content, in an export with blobs inline ("data",
	// base64 in the line); nil in one with blobs as files, where it is
	// the file <BlobDir>/sha256-<hex> (ReadContent reads either).
	Data []byte `json:"data,omitempty"`
}

// Manifest is the record of a workspace snapshot event, as the store
// writes it (sessionstore's Workspaces): the files of a delta against the
// workspace as of the event's parent (Deleted entries for removals), or,
// with Full, every file of the workspace.
type Manifest struct {
	Full  bool
	Label string
	Files []sessionstore.FileEntry
}

// manifestMark is how the record of a snapshot event begins.
const manifestMark = `{"sessionstore":"snapshot"`

// manifestRecord is a manifest's record, the members read here.
type manifestRecord struct {
	Tag   string                   `json:"sessionstore"`
	Full  bool                     `json:"full"`
	Label string                   `json:"label"`
	Files []sessionstore.FileEntry `json:"files"`
}

// IsManifest reports whether ev is a workspace snapshot event: a custom
// event whose record starts with {"sessionstore":"snapshot" (the store
// reads any such record as its own). An event whose record is not in
// hand (a blob's, unresolved) is not known to be one.
func IsManifest(ev sessionstore.Event) bool {
	return ev.Kind == sessionstore.KindCustom && bytes.HasPrefix(ev.Record, []byte(manifestMark))
}

// ParseManifest returns the manifest of ev, and false for an event that
// is not a snapshot (IsManifest). A manifest that does not decode, or
// lists a file without a path or without a valid digest, is an error
// wrapping ErrFormat.
func ParseManifest(ev sessionstore.Event) (Manifest, bool, error) {
	if !IsManifest(ev) {
		return Manifest{}, false, nil
	}
	var m manifestRecord
	if err := json.Unmarshal(ev.Record, &m); err != nil {
		return Manifest{}, true, fmt.Errorf("%w: event %s: workspace manifest: %v", ErrFormat, ev.ID, err)
	}
	if m.Tag != "snapshot" {
		return Manifest{}, true, fmt.Errorf("%w: event %s: workspace manifest with tag %q", ErrFormat, ev.ID, m.Tag)
	}
	for _, f := range m.Files {
		if f.Path == "" {
			return Manifest{}, true, fmt.Errorf("%w: event %s: workspace manifest: a file without a path", ErrFormat, ev.ID)
		}
		if f.Deleted {
			continue
		}
		if _, err := BlobName(f.Digest); err != nil {
			return Manifest{}, true, fmt.Errorf("%w: event %s: workspace file %q: malformed digest %q", ErrFormat, ev.ID, f.Path, f.Digest)
		}
		if f.Size < 0 {
			return Manifest{}, true, fmt.Errorf("%w: event %s: workspace file %q: size %d", ErrFormat, ev.ID, f.Path, f.Size)
		}
	}
	return Manifest{Full: m.Full, Label: m.Label, Files: m.Files}, true, nil
}

// contentsOf lists the distinct contents the manifest names, in the
// order of its files: the first entry of each digest.
func contentsOf(m Manifest) []sessionstore.FileEntry {
	seen := map[string]bool{}
	var out []sessionstore.FileEntry
	for _, f := range m.Files {
		if f.Deleted || seen[f.Digest] {
			continue
		}
		seen[f.Digest] = true
		out = append(out, f)
	}
	return out
}

// writeFiles writes the "files" member of a manifest's event line, from
// its comma on, into w: each content of files (contentsOf) read from the
// store, base64 in the line (blobs nil) or as a blob file (blobs).
func writeFiles(ctx context.Context, w io.Writer, st *sessionstore.Store, session uuid.UUID, ev sessionstore.Event, files []sessionstore.FileEntry, blobs *blobWriter, stats *Stats) error {
	if _, err := io.WriteString(w, `,"files":[`); err != nil {
		return writeErr(err)
	}
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		read := func() ([]byte, error) {
			b, err := st.ReadFile(ctx, session, f)
			if err != nil {
				return nil, fmt.Errorf("export: session %s: event %s: workspace file %q: %w", session, ev.ID, f.Path, err)
			}
			return b, nil
		}
		sep := ""
		if i > 0 {
			sep = ","
		}
		// The digest is checked (ParseManifest): hex, nothing to escape.
		if _, err := io.WriteString(w, sep+`{"digest":"`+f.Digest+`","size":`+strconv.FormatInt(f.Size, 10)); err != nil {
			return writeErr(err)
		}
		if blobs != nil {
			if err := blobs.put(f.Digest, read, stats); err != nil {
				return err
			}
		} else {
			data, err := read()
			if err != nil {
				return err
			}
			if _, err := io.WriteString(w, `,"data":"`); err != nil {
				return writeErr(err)
			}
			enc := base64.NewEncoder(base64.StdEncoding, w)
			if _, err := enc.Write(data); err != nil {
				return writeErr(err)
			}
			if err := enc.Close(); err != nil {
				return writeErr(err)
			}
			if _, err := io.WriteString(w, `"`); err != nil {
				return writeErr(err)
			}
		}
		if _, err := io.WriteString(w, "}"); err != nil {
			return writeErr(err)
		}
		stats.FileContents++
		stats.FileBytes += f.Size
	}
	if _, err := io.WriteString(w, "]"); err != nil {
		return writeErr(err)
	}
	return nil
}

// checkContents checks the "files" of an event line read: each content
// well formed, with its data in an export with blobs inline and without
// it in one with blobs as files, matching its digest and size, no digest
// twice, and, when the event's record is in hand, exactly the contents
// its manifest names. It returns what is wrong, or "".
func checkContents(ev sessionstore.Event, files []Content, inline bool) string {
	if ev.Kind != sessionstore.KindCustom {
		return fmt.Sprintf("event %s: workspace contents on a %s event", ev.ID, ev.Kind)
	}
	seen := make(map[string]bool, len(files))
	for _, c := range files {
		name, err := BlobName(c.Digest)
		switch {
		case err != nil:
			return fmt.Sprintf("event %s: workspace content: malformed digest %q", ev.ID, c.Digest)
		case seen[c.Digest]:
			return fmt.Sprintf("event %s: workspace content %s repeated", ev.ID, c.Digest)
		case c.Size < 0:
			return fmt.Sprintf("event %s: workspace content %s: size %d", ev.ID, c.Digest, c.Size)
		case inline && c.Data == nil:
			return fmt.Sprintf("event %s: workspace content %s without its data in an export with blobs inline", ev.ID, c.Digest)
		case !inline && c.Data != nil:
			return fmt.Sprintf("event %s: workspace content %s with data in an export with blobs as files", ev.ID, c.Digest)
		}
		seen[c.Digest] = true
		if c.Data != nil {
			if int64(len(c.Data)) != c.Size {
				return fmt.Sprintf("event %s: workspace content %s: %d bytes of data, size %d", ev.ID, c.Digest, len(c.Data), c.Size)
			}
			if sum := sha256.Sum256(c.Data); hex.EncodeToString(sum[:]) != strings.TrimPrefix(name, "sha256-") {
				return fmt.Sprintf("event %s: workspace content does not match its digest %s", ev.ID, c.Digest)
			}
		}
	}
	if ev.Record == nil {
		return "" // a blob file's record: not in hand
	}
	m, ok, err := ParseManifest(ev)
	if err != nil {
		return strings.TrimPrefix(err.Error(), ErrFormat.Error()+": ")
	}
	if !ok {
		return fmt.Sprintf("event %s: workspace contents on an event that is not a snapshot", ev.ID)
	}
	want := contentsOf(m)
	for _, f := range want {
		if !seen[f.Digest] {
			return fmt.Sprintf("event %s: workspace file %q: its content %s is not in the line", ev.ID, f.Path, f.Digest)
		}
		delete(seen, f.Digest)
	}
	for d := range seen {
		return fmt.Sprintf("event %s: workspace content %s is not named by its manifest", ev.ID, d)
	}
	for _, f := range want {
		for _, c := range files {
			if c.Digest == f.Digest && c.Size != f.Size {
				return fmt.Sprintf("event %s: workspace file %q: size %d, its content %d", ev.ID, f.Path, f.Size, c.Size)
			}
		}
	}
	return ""
}

// ReadContent returns the content c, checked against its digest and size:
// c.Data, or the file <dir>/sha256-<hex>, dir being the blob directory of
// an export with "blobs":"files".
//
// Errors: ErrFormat for a malformed digest or content that does not match;
// ErrBlobFile (wrapping the file system's error) for a missing file.
func ReadContent(dir string, c Content) ([]byte, error) {
	name, err := BlobName(c.Digest)
	if err != nil {
		return nil, err
	}
	b := c.Data
	path := "data"
	if b == nil {
		path = filepath.Join(dir, name)
		if b, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBlobFile, err)
		}
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != strings.TrimPrefix(name, "sha256-") {
		return nil, fmt.Errorf("%w: %s does not match its digest %s", ErrFormat, path, c.Digest)
	}
	if int64(len(b)) != c.Size {
		return nil, fmt.Errorf("%w: %s holds %d bytes, the export says %d", ErrFormat, path, len(b), c.Size)
	}
	return b, nil
}
