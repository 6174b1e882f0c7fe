package sessionstore

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/seam"
)

// Encrypted sessions
//
// A Store opened with Options.Keys creates encrypted sessions: Create
// makes the session a data key (internal/seal), has the KeyProvider wrap
// it, and writes the wrapped key to its key record,
// <root>/keys/<session>.json, before the session's directory exists, so
// that an encrypted session always has its key. session.json says the
// session is encrypted (Meta.Encrypted), so that a Store without the key
// refuses it rather than hand out sealed bytes.
//
// Every record of an encrypted session is stored sealed: Append replaces
// the record by its envelope, a JSON string holding the base64 of the
// key's generation (4 bytes) and the AES-256-GCM sealing (nonce, cipher
// text, tag) of the record, compressed with zstd first when that makes
// it smaller. The envelope is bound to its session (associated data), so
// an envelope copied into another session does not open. Since the
// envelope is a record like any other, everything below the record (chunk
// lines, sealed chunks, blobs and their lazy reads, the index, recovery,
// Verify, GC) works on it unchanged and never sees the plain record; the
// Store opens envelopes where events leave it (Load, Event, Resolve, the
// iterators, the subscriptions) and where it reads a record itself
// (compaction boundaries, idempotent retries).
//
// In clear stay what listing, the tree and recovery need: ids, parents,
// kinds, roles, times, sizes (of the envelopes), HEAD, lanes and
// session.json (metadata is for listing without a key: docs/encryption.md
// says why). Previews are sealed in the index (sealPreview), bound to
// their event, and opened where nodes leave the Store (previews in
// index.go). A fork has a key of its own and reads its prefix under its
// parent's (readRun). docs/encryption.md states what is not built yet
// (Rewrap and Reencrypt in the remote mode). Reencrypt (reencrypt.go) seals a session again under
// a new data key; encrypt_remote.go keeps key records in the object
// store with Options.Remote.
//
// Deletion: the key record goes first. A final delete (NoTrash, Purge,
// the trash's expiry) removes the key record and syncs its directory
// before it removes the data, so that from then on no copy of the data
// (a backup of the session's directory, a sector the file system did not
// overwrite) opens, even with the key-encryption key. A delete to the
// trash moves the key record into the session's directory first
// (key.json) and the directory into the trash; Undelete moves both back.

const (
	keysDir = "keys"
	// keptKeyFile is the key record's name inside a session directory
	// on its way to or in the trash.
	keptKeyFile = "key.json"
	// envelopeFlagZstd marks a sealed record compressed with zstd.
	envelopeFlagZstd = 1
	// compressFrom is the record size from which an envelope tries
	// compression.
	compressFrom = 512
)

// KeyError reports a session whose data key cannot be had: the
// KeyProvider does not hold its key-encryption key (ErrKeyUnavailable),
// or the wrapped key does not unwrap under it (ErrWrongKey), or the
// Store has no KeyProvider at all (ErrKeyUnavailable). It is never a
// verdict on the session's data.
type KeyError struct {
	Session uuid.UUID
	KeyID   string // the key-encryption key the record names; empty when no record was read
	Err     error
}

func (e *KeyError) Error() string {
	if e.KeyID == "" {
		return fmt.Sprintf("sessionstore: session %s: %v", e.Session, e.Err)
	}
	return fmt.Sprintf("sessionstore: session %s: key %s: %v", e.Session, e.KeyID, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// sessionKey is the data key of an encrypted session, by generation.
type sessionKey struct {
	session uuid.UUID
	kek     string // the key-encryption key of the current generation
	cur     uint32
	ciphers map[uint32]*seal.Cipher
	created seal.Record // a new session's key record, until its files are made
}

// onceOK runs a function until it succeeds once.
type onceOK struct {
	mu   sync.Mutex
	done bool
}

// Do runs f unless a call of it succeeded before.
func (o *onceOK) Do(f func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	err := f()
	o.done = err == nil
	return err
}

// keyCache holds, per session a Store has touched, a cachedKey: its
// *sessionKey, or plainSession for a session that is not encrypted, with
// the stamp of its key record when it was read. An entry is used only
// while the stamp is the same, so that a session deleted and made again
// under its id by another Store or process (a new key record, or one
// where there was none) is read again, never sealed or opened under a
// key that is no longer its own.
type keyCache struct{ m sync.Map }

type cachedKey struct {
	k     *sessionKey
	stamp keyStamp
	// h is the session's open session in the registry when the entry was
	// made: while that one stays open in a writable Store, it holds the
	// session's lock, and the entry is used without a stat.
	h *openSession
}

// keyStamp is what a Stat says of a key record: whether it exists, its
// size and modification time.
type keyStamp struct {
	exists bool
	size   int64
	mod    int64
}

var plainSession = &sessionKey{}

// keyStampOf stats session's key record in keys/.
func (s *Store) keyStampOf(session uuid.UUID) keyStamp {
	info, err := s.opts.fs.Stat(s.keyPath(session))
	if err != nil {
		return keyStamp{}
	}
	return keyStamp{exists: true, size: info.Size(), mod: info.ModTime().UnixNano()}
}

// wrapContext is the context a session's data key is wrapped with.
func wrapContext(session uuid.UUID) []byte {
	return append([]byte("sessionstore data key "), session.String()...)
}

func (s *Store) keyPath(session uuid.UUID) string {
	return filepath.Join(s.dir, keysDir, session.String()+".json")
}

// newSessionKey makes and wraps the data key of a new session. Its key
// record is written by writeKeyRecord, when the session's directory is
// made.
func (s *Store) newSessionKey(ctx context.Context, session uuid.UUID) (*sessionKey, error) {
	c, w, err := s.newDataKey(ctx, session, 1)
	if err != nil {
		return nil, err
	}
	return &sessionKey{
		session: session, kek: w.KeyID, cur: 1, ciphers: map[uint32]*seal.Cipher{1: c},
		created: seal.Record{Session: session, Keys: []seal.WrappedKey{w}},
	}, nil
}

// newDataKey makes a data key of generation gen for session and has the
// provider wrap it.
func (s *Store) newDataKey(ctx context.Context, session uuid.UUID, gen uint32) (*seal.Cipher, seal.WrappedKey, error) {
	key, err := seal.NewKey()
	if err != nil {
		return nil, seal.WrappedKey{}, err
	}
	kek, wrapped, err := s.opts.Keys.Wrap(ctx, key, wrapContext(session))
	if err != nil {
		return nil, seal.WrappedKey{}, &KeyError{Session: session, Err: err}
	}
	if err := seal.CheckKeyID(kek); err != nil {
		return nil, seal.WrappedKey{}, &KeyError{Session: session, KeyID: kek, Err: err}
	}
	c, err := seal.NewCipher(key)
	if err != nil {
		return nil, seal.WrappedKey{}, err
	}
	return c, seal.WrappedKey{Gen: gen, KeyID: kek, Wrapped: wrapped}, nil
}

// writeKeyRecord durably writes key's record, the key of the new
// encrypted session id, with the catalogue's lock held and before the
// session's directory is made (makeSessionDir): an encrypted session
// always has its key. A record a crashed Create or a purge left with no
// directory is replaced; when the directory exists too, another Create of
// the id (in another Store) is making it, and skip says so: this Create
// fails without touching that session's key. The keys directory is made
// and synced into the root on first use.
func (s *Store) writeKeyRecord(id uuid.UUID, key *sessionKey) (skip bool, err error) {
	if _, err := s.opts.fs.Stat(s.keyPath(id)); err == nil {
		if _, err := s.opts.fs.Stat(s.sessionDir(id)); err == nil {
			return true, nil
		}
	}
	dir := filepath.Join(s.dir, keysDir)
	if err := s.keysDirMade.Do(func() error {
		if _, err := s.opts.fs.Stat(dir); err == nil {
			return nil
		}
		if err := s.opts.fs.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return s.opts.fs.SyncDir(s.dir)
	}); err != nil {
		return false, fmt.Errorf("sessionstore: keys directory: %w", err)
	}
	if err := seal.WriteRecord(s.opts.fs, dir, id.String()+".json", key.created, 0o600); err != nil {
		return false, fmt.Errorf("sessionstore: key record of session %s: %w", id, err)
	}
	return false, nil
}

// cacheKey records that this Store made session id with key (nil: plain).
func (s *Store) cacheKey(id uuid.UUID, key *sessionKey) {
	if key == nil {
		key = plainSession
	}
	s.keys.m.Store(id, cachedKey{k: key, stamp: s.keyStampOf(id), h: s.reg.lookup(id)})
}

// loadSessionKey reads the key record of an encrypted session and
// unwraps its data keys: from keys/, or from the session's directory
// where a delete to the trash that a crash interrupted left it.
func (s *Store) loadSessionKey(ctx context.Context, session uuid.UUID) (*sessionKey, error) {
	if s.opts.Keys == nil {
		return nil, &KeyError{Session: session, Err: fmt.Errorf("%w: the session is encrypted and the Store has no KeyProvider (Options.Keys)", ErrKeyUnavailable)}
	}
	path := s.keyPath(session)
	rec, err := seal.ReadRecord(s.opts.fs, path, session)
	if errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(s.sessionDir(session), keptKeyFile)
		rec, err = seal.ReadRecord(s.opts.fs, path, session)
	}
	if errors.Is(err, fs.ErrNotExist) && s.opts.Remote != nil {
		// Not here yet: the object store's (encrypt_remote.go).
		rec, err = s.fetchKeyObject(ctx, session)
		if errors.Is(err, ErrObjectNotFound) {
			return nil, &KeyError{Session: session, Err: fmt.Errorf("%w: no key record (%s): the session's key was destroyed by a delete", ErrKeyUnavailable, seam.KeyObject(session))}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &KeyError{Session: session, Err: fmt.Errorf("%w: no key record (%s): the session's key was destroyed by a delete", ErrKeyUnavailable, s.keyPath(session))}
	}
	if err != nil {
		return nil, damage(err)
	}
	return s.unwrapRecord(ctx, session, rec)
}

// unwrapRecord unwraps the data keys of session's key record rec.
func (s *Store) unwrapRecord(ctx context.Context, session uuid.UUID, rec seal.Record) (*sessionKey, error) {
	k := &sessionKey{session: session, ciphers: map[uint32]*seal.Cipher{}}
	for _, w := range rec.Keys {
		key, err := s.opts.Keys.Unwrap(ctx, w.KeyID, w.Wrapped, wrapContext(session))
		if err != nil {
			return nil, &KeyError{Session: session, KeyID: w.KeyID, Err: err}
		}
		c, err := seal.NewCipher(key)
		if err != nil {
			return nil, &KeyError{Session: session, KeyID: w.KeyID, Err: fmt.Errorf("%w: %v", ErrWrongKey, err)}
		}
		k.ciphers[w.Gen] = c
		k.cur, k.kek = w.Gen, w.KeyID
	}
	return k, nil
}

// recordKey returns the key of session's records: nil for a session
// that is not encrypted. It reads session.json and the key record once
// per session and Store. It is called inside a call that has begun.
func (s *Store) recordKey(ctx context.Context, session uuid.UUID) (*sessionKey, error) {
	return s.recordKeyWith(ctx, session, func() (bool, bool) { return s.reg.encrypted(session) })
}

// heldKey is recordKey for a caller that holds h.mu: h's metadata says
// whether the session is encrypted (recordKey asks the registry, which
// takes h.mu).
func (s *Store) heldKey(ctx context.Context, h *openSession) (*sessionKey, error) {
	enc := h.meta.Encrypted
	return s.recordKeyWith(ctx, h.id, func() (bool, bool) { return enc, true })
}

// recordKeyWith is recordKey, with known saying whether the session is
// encrypted when its open session knows (ok false: session.json says).
func (s *Store) recordKeyWith(ctx context.Context, session uuid.UUID, known func() (enc, ok bool)) (*sessionKey, error) {
	if e := s.deferred.get(session); e != nil {
		// Deferred in this Store: its key is the one its Create made,
		// until its files are made (materialize caches it) or another
		// writer made the id first (then this Store's writes fail, and
		// its reads read that writer's session).
		e.mu.Lock()
		k, made, lost := e.key, e.made, e.lost
		e.mu.Unlock()
		if !made && lost == nil {
			if _, err := s.opts.fs.Stat(filepath.Join(s.sessionDir(session), metaFile)); err != nil {
				return k, nil
			}
			// Files another writer made: theirs decide, as for reads.
		}
	}
	if v, ok := s.keys.m.Load(session); ok && !s.opts.ReadOnly {
		// Open in this writable Store since the entry was made: it
		// holds the session's lock, so no other writer deleted it and
		// made it again meanwhile (a Delete here forgets the key). No
		// stat on the append path.
		if c := v.(cachedKey); c.h != nil && c.h == s.reg.lookup(session) {
			if c.k != plainSession {
				return c.k, nil
			}
			return nil, nil
		}
	}
	stamp := s.keyStampOf(session)
	if v, ok := s.keys.m.Load(session); ok {
		if c := v.(cachedKey); c.stamp == stamp {
			if h := s.reg.lookup(session); h != c.h {
				c.h = h // open again: no stat while it stays open
				s.keys.m.Store(session, c)
			}
			if c.k == plainSession {
				return nil, nil
			}
			return c.k, nil
		}
	}
	enc, ok := known()
	if !ok {
		m, err := s.meta(ctx, session)
		if err != nil {
			return nil, err
		}
		enc = m.Encrypted
	}
	if !enc {
		s.keys.m.Store(session, cachedKey{k: plainSession, stamp: stamp, h: s.reg.lookup(session)})
		return nil, nil
	}
	k, err := s.loadSessionKey(ctx, session)
	if err != nil {
		return nil, err
	}
	s.keys.m.Store(session, cachedKey{k: k, stamp: stamp, h: s.reg.lookup(session)})
	return k, nil
}

// ownKey is recordKey for a call about to open session itself: with
// Options.Remote, it opens the session first (as the call would next,
// which then finds it open), so that its metadata says whether it is
// encrypted without a listing of the object store's. recordKey alone is
// for sessions a call reads without opening them (a fork's prefix).
func (s *Store) ownKey(ctx context.Context, session uuid.UUID) (*sessionKey, error) {
	if s.opts.Remote != nil && s.deferred.get(session) == nil {
		if _, known := s.reg.encrypted(session); !known {
			h, err := s.reg.acquireLazy(ctx, session, nil)
			if err != nil {
				return nil, err
			}
			s.reg.release(h)
		}
	}
	return s.recordKey(ctx, session)
}

// forgetKey drops what the Store knows of session's key (deleted, made
// again, brought back).
func (s *Store) forgetKey(session uuid.UUID) { s.keys.m.Delete(session) }

var (
	envEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	envDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecordSizeLimit))
)

// sealRecord returns the envelope of the compact JSON rec.
func (k *sessionKey) sealRecord(rec []byte) []byte {
	var body []byte
	if len(rec) >= compressFrom {
		// The body in the buffer the sealing appends to, after the
		// generation and the nonce: one allocation for both.
		z := envEncoder.EncodeAll(rec, append(make([]byte, 0, 1+len(rec)), envelopeFlagZstd))
		if len(z) < len(rec)+1 {
			body = z
		}
	}
	if body == nil {
		body = append(append(make([]byte, 0, 1+len(rec)), 0), rec...)
	}
	return k.sealBody(body)
}

// sealBody returns the envelope of body (a flag byte, then the record,
// compressed or not) sealed under the current generation.
func (k *sessionKey) sealBody(body []byte) []byte {
	raw := make([]byte, 4, 4+len(body)+seal.Overhead)
	binary.BigEndian.PutUint32(raw, k.cur)
	raw = k.ciphers[k.cur].Seal(raw, body, seal.AAD(seal.KindRecord, k.session, uint64(k.cur), 0))
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(raw))+2)
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, raw)
	return append(out, '"')
}

// sealedPreviewText is the longest text of a sealed preview: what
// eventline.PreviewMax leaves after the generation and the sealing's
// nonce and tag. The text is cut to it (eventline.Preview.Cut).
const sealedPreviewText = eventline.PreviewMax - 4 - seal.Overhead

// sealPreview returns the sealed form of pv, the preview of event id's
// record: its text cut to sealedPreviewText bytes, sealed under the
// current generation and bound to the session and the event (the
// associated data), so that a preview copied to another event or session
// does not open. An empty preview is eventline.SealedNone.
func (k *sessionKey) sealPreview(id uuid.UUID, pv eventline.Preview) eventline.Preview {
	cut := pv.Cut(sealedPreviewText)
	return k.sealPreviewText(id, cut.Bytes())
}

// sealPreviewText is sealPreview given the text, at most
// sealedPreviewText bytes.
func (k *sessionKey) sealPreviewText(id uuid.UUID, text []byte) eventline.Preview {
	if len(text) == 0 || len(text) > sealedPreviewText {
		return eventline.SealedNone()
	}
	raw := make([]byte, 4, eventline.PreviewMax)
	binary.BigEndian.PutUint32(raw, k.cur)
	raw = k.ciphers[k.cur].Seal(raw, text, previewAAD(k.session, id))
	out, _ := eventline.SealedPreview(raw) // at most PreviewMax bytes
	return out
}

// openPreview returns the text of pv, the sealed preview of event id,
// and false when it does not open (damage, a generation the key record
// no longer holds).
func (k *sessionKey) openPreview(id uuid.UUID, pv *eventline.Preview) ([]byte, bool) {
	text := k.appendPreview(nil, id, pv)
	return text, len(text) > 0 // an empty text is never sealed
}

// appendPreview appends to dst the text of pv, the sealed preview of
// event id, and returns the result: dst as it was when pv does not open.
func (k *sessionKey) appendPreview(dst []byte, id uuid.UUID, pv *eventline.Preview) []byte {
	raw := pv.SealedBytes()
	if len(raw) < 4+seal.Overhead {
		return dst
	}
	c, ok := k.ciphers[binary.BigEndian.Uint32(raw)]
	if !ok {
		return dst
	}
	// Room made here, growing by doubling: the cipher's append makes
	// exactly what it needs, which would copy a shared arena each time.
	dst = slices.Grow(dst, len(raw))
	out, err := c.Open(dst, raw[4:], previewAAD(k.session, id))
	if err != nil || !utf8.Valid(out[len(dst):]) {
		return dst
	}
	return out
}

// previewAAD is the associated data of event id's sealed preview.
func previewAAD(session, id uuid.UUID) []byte {
	return seal.AAD(seal.KindPreview, session, binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:]))
}

// errEnvelope reports stored bytes of an encrypted session that are not
// an envelope its key opens.
var errEnvelope = errors.New("record does not open under the session's key")

// openRecord returns the record sealed in env.
func (k *sessionKey) openRecord(env []byte) ([]byte, error) {
	_, body, err := k.openBody(env)
	if err != nil {
		return nil, err
	}
	switch body[0] {
	case 0:
		return body[1:], nil
	case envelopeFlagZstd:
		out, err := envDecoder.DecodeAll(body[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errEnvelope, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown flag %d", errEnvelope, body[0])
}

// openBody returns the generation env was sealed under and its body (a
// flag byte, then the record, compressed or not), never empty.
func (k *sessionKey) openBody(env []byte) (uint32, []byte, error) {
	if len(env) < 2 || env[0] != '"' || env[len(env)-1] != '"' {
		return 0, nil, fmt.Errorf("%w: not an envelope", errEnvelope)
	}
	raw, err := base64.StdEncoding.Strict().AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(env)-2)), env[1:len(env)-1])
	if err != nil || len(raw) < 4+seal.Overhead {
		return 0, nil, fmt.Errorf("%w: not an envelope", errEnvelope)
	}
	gen := binary.BigEndian.Uint32(raw)
	c, ok := k.ciphers[gen]
	if !ok {
		return 0, nil, fmt.Errorf("%w: sealed under key generation %d, which its key record does not hold", errEnvelope, gen)
	}
	// Opened in place: the plain text starts where the cipher text did.
	body, err := c.Open(raw[4+seal.NonceSize:4+seal.NonceSize], raw[4:], seal.AAD(seal.KindRecord, k.session, uint64(gen), 0))
	if err != nil || len(body) == 0 {
		return 0, nil, fmt.Errorf("%w: %v", errEnvelope, err)
	}
	return gen, body, nil
}

// unsealEvents opens the records of evs, events of session, in place.
// A record that does not open is a *CorruptionError naming the session's
// directory (the envelope's event is in the message): with the right key
// (the key record unwrapped), an envelope that fails its tag is damage.
func (s *Store) unsealEvents(ctx context.Context, session uuid.UUID, evs []Event) error {
	k, err := s.recordKey(ctx, session)
	if err != nil {
		return err
	}
	return s.openEvents(k, session, evs)
}

// openEvents opens the records of evs under k (nil: not encrypted). A
// long path is opened in runs of openRun events on every core: opening
// costs about as much per record as reading it (base64 and the tag).
func (s *Store) openEvents(k *sessionKey, session uuid.UUID, evs []Event) error {
	if k == nil {
		return nil
	}
	runs := (len(evs) + openRun - 1) / openRun
	errs := make([]error, runs)
	forEach(runs, runtime.GOMAXPROCS(0), func(_, r int) {
		for i := r * openRun; i < min(len(evs), (r+1)*openRun); i++ {
			if evs[i].Record == nil {
				continue
			}
			rec, err := k.openRecord(evs[i].Record)
			if err != nil {
				errs[r] = corruptf(s.sessionDir(session), 0, "event %s: %w", evs[i].ID, err)
				return
			}
			evs[i].Record = rec
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// openRun is how many records openEvents opens in one run.
const openRun = 512

// moveKeyIntoSession moves session's key record into its directory
// (keptKeyFile), durably, before the directory goes to
// the trash. A session without a key record is left as it is.
func (s *Store) moveKeyIntoSession(session uuid.UUID) error {
	from := s.keyPath(session)
	if _, err := s.opts.fs.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	dir := s.sessionDir(session)
	if err := s.opts.fs.Rename(from, filepath.Join(dir, keptKeyFile)); err != nil {
		return fmt.Errorf("sessionstore: move key record of session %s: %w", session, err)
	}
	// A rename across two directories is one change to the file
	// system's metadata, made durable whole by a sync of either (as
	// internal/vfs's MemFS models it): the destination's.
	return s.opts.fs.SyncDir(dir)
}

// moveKeyOutOfSession moves a key record a delete to the trash moved into
// session's directory back to keys/, durably (Undelete).
func (s *Store) moveKeyOutOfSession(session uuid.UUID) error {
	dir := s.sessionDir(session)
	from := filepath.Join(dir, keptKeyFile)
	if _, err := s.opts.fs.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	to := s.keyPath(session)
	if err := s.opts.fs.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	if err := s.opts.fs.Rename(from, to); err != nil {
		return fmt.Errorf("sessionstore: move key record of session %s back: %w", session, err)
	}
	return s.opts.fs.SyncDir(filepath.Dir(to)) // as moveKeyIntoSession
}

// destroyKey removes session's key record from keys/ and syncs the
// directory: crypto-shredding, the first step of a final delete.
func (s *Store) destroyKey(session uuid.UUID) error {
	s.forgetKey(session)
	if err := shredKeyFile(s, filepath.Join(s.sessionDir(session), keptKeyFile)); err != nil {
		return err
	}
	return shredKeyFile(s, s.keyPath(session))
}

// shredKeyFile removes the key record at path, if there is one, and syncs
// its directory.
func shredKeyFile(s *Store, path string) error {
	err := s.opts.fs.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessionstore: destroy key record %s: %w", path, err)
	}
	return s.opts.fs.SyncDir(filepath.Dir(path))
}

// RewrapReport is what Rewrap did.
type RewrapReport struct {
	Rewrapped int // key records now wrapped under the current key
	Current   int // key records that were already
	// Skipped are the sessions whose records could not be rewrapped,
	// each with its error (a *KeyError when the provider does not
	// unwrap it; ErrLocked when another process holds the session).
	Skipped []RewrapSkip
}

// Rewrap rewraps the data key of every encrypted session of the root,
// and of every session kept in the trash, under the KeyProvider's
// current key-encryption key (Options.Keys), so that the older keys can
// be retired. No data is rewritten: each key record is replaced whole
// (a temporary file, synced, renamed over it, its directory synced), so
// a crash leaves every record under the old key or the new one, and the
// provider must hold both until Rewrap has returned without a skipped
// session. A session deleted meanwhile is left alone (its record is not
// brought back). Each session is taken as Delete takes it, one at a
// time, so sessions open in this Store close and reopen on next use.
//
// With Options.Remote, the key records are the objects under keys/ in
// the object store (encrypt_remote.go), each replaced with a conditional
// write (ObjectReplacer) of the version read, read again if it changed:
// one a Delete destroyed meanwhile is not brought back, nor is the key of
// a session made again under its id replaced. No session is taken: the
// data keys do not change, and Stores that hold them go on. On a
// versioned bucket the older versions, wrapped under the older key,
// stay until the bucket's lifecycle rules expire them (or a Delete
// removes them); they open nothing once that key is retired.
//
// Errors: ErrReadOnly; ErrInvalidOptions without Options.Keys;
// ErrRemoteUnsupported with Options.Remote and an ObjectStore that is not
// an ObjectReplacer; ctx's.
func (s *Store) Rewrap(ctx context.Context) (RewrapReport, error) {
	var rep RewrapReport
	if err := s.begin(ctx); err != nil {
		return rep, err
	}
	defer s.end()
	if s.opts.ReadOnly {
		return rep, ErrReadOnly
	}
	if s.opts.Keys == nil {
		return rep, fmt.Errorf("%w: Rewrap needs Options.Keys", ErrInvalidOptions)
	}
	if s.opts.Remote != nil {
		return s.rewrapRemote(ctx)
	}
	names, err := s.opts.fs.ReadDir(filepath.Join(s.dir, keysDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		id, err := uuid.Parse(strings.TrimSuffix(n, ".json"))
		if err != nil || id.String()+".json" != n {
			continue // a temporary file of a replace a crash interrupted
		}
		done, err := s.rewrapSession(ctx, id)
		rep.add(id, done, err)
	}
	// A record a Delete to the trash moved into a session's directory
	// before the move of the directory failed or a crash cut it short
	// (or an Undelete's before it moved the record back): moved back to
	// keys/ and rewrapped there.
	ids, err := s.opts.fs.ReadDir(filepath.Join(s.dir, sessionsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	for _, n := range ids {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		id, err := uuid.Parse(n)
		if err != nil || id.String() != n {
			continue
		}
		if _, err := s.opts.fs.Stat(filepath.Join(s.sessionDir(id), keptKeyFile)); err != nil {
			continue
		}
		done, err := s.rewrapSession(ctx, id)
		rep.add(id, done, err)
	}
	// The trash's entries: each record is rewritten inside its entry,
	// which a Purge or an Undelete meanwhile moves away, failing the
	// write (the record is never brought back where it was).
	trash := filepath.Join(s.dir, trashDir)
	entries, err := s.opts.fs.ReadDir(trash)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	for _, n := range entries {
		e, kept := parseTrashName(n)
		if !kept {
			continue
		}
		path := filepath.Join(trash, n, keptKeyFile)
		if _, err := s.opts.fs.Stat(path); err != nil {
			continue // not encrypted
		}
		done, err := s.rewrapFile(ctx, e.id, path)
		rep.add(e.id, done, err)
	}
	return rep, nil
}

func (r *RewrapReport) add(id uuid.UUID, done bool, err error) {
	switch {
	case err != nil:
		r.Skipped = append(r.Skipped, RewrapSkip{Session: id, Err: err})
	case done:
		r.Rewrapped++
	default:
		r.Current++
	}
}

// rewrapSession rewraps keys/<id>.json under the session's lock, which a
// Delete takes to move it.
func (s *Store) rewrapSession(ctx context.Context, id uuid.UUID) (bool, error) {
	release, err := s.reg.hold(ctx, id)
	if err != nil {
		return false, err
	}
	defer release(false)
	lk, err := s.reg.lockSession(ctx, filepath.Join(s.sessionDir(id), lockName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // no session directory: a record a crash left, or one being created
	}
	if err != nil {
		return false, err
	}
	defer lk.Close()
	path := s.keyPath(id)
	if _, err := s.opts.fs.Stat(path); err != nil {
		if err := s.moveKeyOutOfSession(id); err != nil { // left there by a Delete cut short
			return false, err
		}
		if _, err := s.opts.fs.Stat(path); err != nil {
			return false, nil // deleted meanwhile
		}
	}
	s.forgetKey(id)
	return s.rewrapFile(ctx, id, path)
}

// rewrapFile replaces the key record at path with one whose keys are all
// wrapped under the provider's current key; false when they were.
func (s *Store) rewrapFile(ctx context.Context, id uuid.UUID, path string) (bool, error) {
	rec, err := seal.ReadRecord(s.opts.fs, path, id)
	if err != nil {
		return false, err
	}
	changed, err := s.rewrapRecord(ctx, id, &rec)
	if err != nil || !changed {
		return false, err
	}
	if err := seal.WriteRecord(s.opts.fs, filepath.Dir(path), filepath.Base(path), rec, 0o600); err != nil {
		return false, fmt.Errorf("sessionstore: rewrap key record %s: %w", path, err)
	}
	return true, nil
}

// rewrapRecord wraps every data key of rec, session id's key record,
// under the provider's current key, and reports whether one was not.
func (s *Store) rewrapRecord(ctx context.Context, id uuid.UUID, rec *seal.Record) (bool, error) {
	changed := false
	for i, w := range rec.Keys {
		key, err := s.opts.Keys.Unwrap(ctx, w.KeyID, w.Wrapped, wrapContext(id))
		if err != nil {
			return false, &KeyError{Session: id, KeyID: w.KeyID, Err: err}
		}
		kek, wrapped, err := s.opts.Keys.Wrap(ctx, key, wrapContext(id))
		if err != nil {
			return false, &KeyError{Session: id, Err: err}
		}
		if err := seal.CheckKeyID(kek); err != nil {
			return false, &KeyError{Session: id, KeyID: kek, Err: err}
		}
		if kek != w.KeyID {
			rec.Keys[i].KeyID, rec.Keys[i].Wrapped = kek, wrapped
			changed = true
		}
	}
	return changed, nil
}

// RewrapSkip is a session Rewrap could not rewrap, and why.
type RewrapSkip struct {
	Session uuid.UUID
	Err     error
}
