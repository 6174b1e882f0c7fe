package export

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// Errors of reading an export. A *ParseError wraps one of them.
var (
	// ErrFormat: the input is not a JSONL export (a line that is not the
	// JSON expected, a header of another format, an event that does not
	// hold together).
	ErrFormat = errors.New("export: not a valid export")
	// ErrVersion: the header names a version this package does not read.
	ErrVersion = errors.New("export: unsupported export version")
	// ErrTruncated: the input ends before the events its header counts.
	ErrTruncated = errors.New("export: export cut short")
)

// ParseError locates a problem in a JSONL export: Name (as given to
// NewReader; may be empty), the 1-based line and the byte offset at which
// that line starts. It matches the sentinel it wraps with errors.Is.
type ParseError struct {
	Name   string
	Line   int
	Offset int64
	Err    error
}

// Error formats the error as "<name>:<line> (offset <n>): <cause>".
func (e *ParseError) Error() string {
	name := e.Name
	if name == "" {
		name = "export"
	}
	return fmt.Sprintf("%s:%d (offset %d): %v", name, e.Line, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// MaxLine is the longest line Reader takes, in bytes (a record is at most
// a few hundred MiB in the store; an export line holds one).
const MaxLine = 1 << 30

// Reader reads a JSONL export back: the header, then one event at a time.
type Reader struct {
	name   string
	br     *bufio.Reader
	line   int
	start  int64 // offset of the current line
	offset int64 // of the next line
	header Header
	read   int       // events read
	last   uuid.UUID // the id of the last event read
	files  []Content // the workspace contents of the last event read
	seen   map[uuid.UUID]bool
	err    error
}

// NewReader reads the header line of the export in r and returns a Reader
// positioned at its first event; name is used in errors (a file path, or
// "").
//
// Errors: a *ParseError wrapping ErrFormat, ErrVersion or ErrTruncated (an
// empty input), or the error of r.
func NewReader(r io.Reader, name string) (*Reader, error) {
	rd := &Reader{name: name, br: bufio.NewReaderSize(r, 64<<10), seen: map[uuid.UUID]bool{}}
	line, err := rd.next()
	if err == io.EOF {
		return nil, rd.errorf(ErrTruncated, "no header line")
	}
	if err != nil {
		return nil, err
	}
	var h Header
	if err := strictUnmarshal(line, &h); err != nil {
		return nil, rd.errorf(ErrFormat, "header: %v", err)
	}
	switch {
	case h.Format != FormatName:
		return nil, rd.errorf(ErrFormat, "header: format %q, not %q", h.Format, FormatName)
	case h.Version != Version:
		return nil, rd.errorf(ErrVersion, "version %d (this build reads %d)", h.Version, Version)
	case h.Scope != Tree && h.Scope != ActivePath && h.Scope != Context:
		return nil, rd.errorf(ErrFormat, "header: unknown scope %q", h.Scope)
	case h.Blobs != BlobsInline && h.Blobs != BlobsFiles:
		return nil, rd.errorf(ErrFormat, "header: unknown blobs mode %q", h.Blobs)
	case h.Events < 0:
		return nil, rd.errorf(ErrFormat, "header: %d events", h.Events)
	}
	rd.header = h
	return rd, nil
}

// Header returns the export's header.
func (r *Reader) Header() Header { return r.header }

// Next returns the next event, or io.EOF after the last one the header
// counts (once the input ends there too). An event whose record is in a
// blob file has Record nil and Digest set: ReadBlob reads it. A workspace
// snapshot's file contents are then Contents.
//
// Errors: a *ParseError wrapping ErrFormat (a line that is not an event, an
// event repeated, with scope "tree" an event before its parent, with scope
// "path" an event whose parent is not the event before it, an inline
// record that does not match its digest, a blob's record missing from an
// export with blobs inline, a line past the count, workspace contents
// that are malformed, do not match their digests, or are not those the
// snapshot's manifest names), ErrTruncated (fewer events than the header counts); the
// error of the input. After an error, Next returns it again.
func (r *Reader) Next() (sessionstore.Event, error) {
	if r.err != nil {
		return sessionstore.Event{}, r.err
	}
	ev, err := r.nextEvent()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *Reader) nextEvent() (sessionstore.Event, error) {
	line, err := r.next()
	if err == io.EOF {
		if r.read < r.header.Events {
			return sessionstore.Event{}, r.errorf(ErrTruncated, "%d events of the %d the header counts", r.read, r.header.Events)
		}
		return sessionstore.Event{}, io.EOF
	}
	if err != nil {
		return sessionstore.Event{}, err
	}
	if r.read == r.header.Events {
		return sessionstore.Event{}, r.errorf(ErrFormat, "a line past the %d events the header counts", r.header.Events)
	}
	r.files = nil
	var el struct {
		sessionstore.Event
		Files *[]Content `json:"files"`
	}
	if err := strictUnmarshal(line, &el); err != nil {
		return sessionstore.Event{}, r.errorf(ErrFormat, "event: %v", err)
	}
	ev := el.Event
	if string(ev.Record) == "null" {
		ev.Record = nil
	}
	switch {
	case ev.ID == uuid.Nil:
		return ev, r.errorf(ErrFormat, "event without an id")
	case r.seen[ev.ID]:
		return ev, r.errorf(ErrFormat, "event %s repeated", ev.ID)
	case ev.BranchFrom != uuid.Nil && ev.BranchFrom != ev.ParentID:
		return ev, r.errorf(ErrFormat, "event %s: branch_from %s is not its parent %s", ev.ID, ev.BranchFrom, ev.ParentID)
	case r.header.Scope == Tree && ev.ParentID != uuid.Nil && !r.seen[ev.ParentID]:
		return ev, r.errorf(ErrFormat, "event %s before its parent %s", ev.ID, ev.ParentID)
	case r.header.Scope == ActivePath && ev.ParentID != r.last:
		return ev, r.errorf(ErrFormat, "event %s: parent %s, not the event before it on the path (%s)", ev.ID, ev.ParentID, r.last)
	case !knownKinds[ev.Kind]:
		return ev, r.errorf(ErrFormat, "event %s: unknown kind %q", ev.ID, ev.Kind)
	case !knownRoles[ev.Role]:
		return ev, r.errorf(ErrFormat, "event %s: unknown role %q", ev.ID, ev.Role)
	case ev.Size < 0:
		return ev, r.errorf(ErrFormat, "event %s: size %d", ev.ID, ev.Size)
	}
	if ev.Digest != "" {
		name, err := BlobName(ev.Digest)
		if err != nil {
			return ev, r.errorf(ErrFormat, "event %s: %v", ev.ID, errors.Unwrap(err))
		}
		if ev.Record != nil {
			if sum := sha256.Sum256(ev.Record); hex.EncodeToString(sum[:]) != strings.TrimPrefix(name, "sha256-") {
				return ev, r.errorf(ErrFormat, "event %s: record does not match its digest %s", ev.ID, ev.Digest)
			}
			if int64(len(ev.Record)) != ev.Size {
				return ev, r.errorf(ErrFormat, "event %s: record of %d bytes, size %d", ev.ID, len(ev.Record), ev.Size)
			}
		}
	}
	if ev.Record == nil && ev.Digest != "" && r.header.Blobs == BlobsInline {
		return ev, r.errorf(ErrFormat, "event %s: no record in an export with blobs inline", ev.ID)
	}
	if ev.Record == nil && ev.Digest == "" && ev.Kind != sessionstore.KindCustom {
		return ev, r.errorf(ErrFormat, "event %s: no record and no digest", ev.ID)
	}
	if ev.Record != nil && int64(len(ev.Record)) != ev.Size && ev.Size != 0 {
		return ev, r.errorf(ErrFormat, "event %s: record of %d bytes, size %d", ev.ID, len(ev.Record), ev.Size)
	}
	if el.Files != nil {
		files := *el.Files
		if files == nil {
			files = []Content{}
		}
		if why := checkContents(ev, files, r.header.Blobs == BlobsInline); why != "" {
			return ev, r.errorf(ErrFormat, "%s", why)
		}
		r.files = files
	}
	r.seen[ev.ID] = true
	r.last = ev.ID
	r.read++
	return ev, nil
}

// Contents returns the workspace contents of the event Next returned
// last, a snapshot's (see "Workspace snapshots" in the package doc): an
// empty slice for a snapshot whose manifest names none (it only removes
// files), nil for an event without a "files" member, which is every
// event but a snapshot's, and a snapshot's in an export written without
// its contents (Options.OmitFiles, or before exports carried them). Read
// each with ReadContent.
func (r *Reader) Contents() []Content { return r.files }

// next returns the next line without its newline, or io.EOF.
func (r *Reader) next() ([]byte, error) {
	r.start = r.offset
	r.line++
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLine {
			return nil, r.errorf(ErrFormat, "line longer than %d bytes", MaxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if len(buf) == 0 {
				return nil, io.EOF
			}
			return nil, r.errorf(ErrTruncated, "last line has no newline")
		}
		if err != nil {
			return nil, fmt.Errorf("export: read %s: %w", r.name, err)
		}
		r.offset += int64(len(buf))
		return buf[:len(buf)-1], nil
	}
}

// errorf is a *ParseError of the current line.
func (r *Reader) errorf(sentinel error, format string, args ...any) error {
	return &ParseError{Name: r.name, Line: r.line, Offset: r.start, Err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))}
}

var knownKinds = map[sessionstore.Kind]bool{
	sessionstore.KindMessage: true, sessionstore.KindToolCall: true, sessionstore.KindToolResult: true,
	sessionstore.KindCompaction: true, sessionstore.KindBranchSummary: true, sessionstore.KindCustom: true,
}

var knownRoles = map[sessionstore.Role]bool{
	sessionstore.RoleNone: true, sessionstore.RoleUser: true, sessionstore.RoleAssistant: true, sessionstore.RoleTool: true,
}

// strictUnmarshal decodes one JSON value, refusing unknown members and
// anything after the value.
func strictUnmarshal(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// ReadBlob reads the record of ev (Digest set, Record nil) from dir, the
// blob directory of an export with "blobs":"files", and checks it against
// its digest and size.
//
// Errors: ErrFormat for an event without a valid digest; ErrBlobFile
// (wrapping the file system's error) for a missing file; an error wrapping
// ErrFormat for a file whose content does not match.
func ReadBlob(dir string, ev sessionstore.Event) ([]byte, error) {
	name, err := BlobName(ev.Digest)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlobFile, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != strings.TrimPrefix(name, "sha256-") {
		return nil, fmt.Errorf("%w: %s does not match its digest", ErrFormat, path)
	}
	if int64(len(b)) != ev.Size {
		return nil, fmt.Errorf("%w: %s holds %d bytes, the event says %d", ErrFormat, path, len(b), ev.Size)
	}
	return b, nil
}
