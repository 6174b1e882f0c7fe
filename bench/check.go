package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// payloadHash is what a load is checked against: the SHA-256 of the
// events' payloads in order, each preceded by its length (8 bytes, big
// endian), in hex. The harness computes it from the events it appended to
// a fixture, and the child from the events the peer loaded.
func payloadHash(evs []Event) string {
	h := sha256.New()
	var n [8]byte
	for _, ev := range evs {
		binary.BigEndian.PutUint64(n[:], uint64(len(ev.Payload)))
		h.Write(n[:])
		h.Write(ev.Payload)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// listHash is the SHA-256 of the sessions' ids and names, sorted by id,
// in hex: what a list is checked against (the ids Create returned and the
// names given).
func listHash(l []SessionInfo) string {
	s := slices.Clone(l)
	slices.SortFunc(s, func(a, b SessionInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	h := sha256.New()
	var n [8]byte
	for _, si := range s {
		h.Write(si.ID[:])
		binary.BigEndian.PutUint64(n[:], uint64(len(si.Name)))
		h.Write(n[:])
		h.Write([]byte(si.Name))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkLoad fails a fresh-process load whose payloads differ from the
// fixture's, or a tree whose payload sizes do not add up to the fixture's.
func checkLoad(peer, op string, r childResult, f fixture) error {
	switch op {
	case "openload":
		if r.Hash != f.hash {
			return fmt.Errorf("%s: the loaded path's payloads hash to %s, the fixture's to %s", peer, r.Hash, f.hash)
		}
	case "tree":
		if r.Payload != f.payload {
			return fmt.Errorf("%s: the tree's payload sizes add up to %d bytes, the fixture's to %d", peer, r.Payload, f.payload)
		}
	}
	return nil
}

// checkList fails a list that is not the sessions created.
func checkList(peer string, got []SessionInfo, want string) error {
	if h := listHash(got); h != want {
		return fmt.Errorf("%s: the listed sessions hash to %s, the created ones to %s", peer, h, want)
	}
	return nil
}

// checkRecent fails a list of the newest sessions that is not want (the
// newest sessions created, newest first): same ids and names, same order.
func checkRecent(peer string, got, want []SessionInfo) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: listed %d recent sessions, want %d", peer, len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name {
			return fmt.Errorf("%s: recent session %d is %s %q, want %s %q", peer, i, got[i].ID, got[i].Name, want[i].ID, want[i].Name)
		}
	}
	return nil
}
