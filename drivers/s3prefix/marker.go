package s3prefix

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A row's lease history is a chain of immutable marker objects
// <lease_prefix><name>#<generation>, generation 1, 2, 3, ... (name is the
// row's marker name: its own name, or a hash of it when that would make
// the key too long; see markerName). Each is
// created with a conditional put (If-None-Match: *), so exactly one
// writer creates generation N+1: every state change of a row (claim,
// reclaim after expiry, release, ack, dead letter) is the creation of
// the next generation, and two writers racing for the same change cannot
// both win. The latest generation is the row's state.

// Marker states.
const (
	stateLeased   = "leased"
	stateReleased = "released"
	stateDone     = "done"
	stateDead     = "dead"
)

// genDigits is the width of the zero-padded generation, so that markers
// of one row list in generation order.
const genDigits = 10

// maxGen is the largest generation that fits genDigits.
const maxGen = 9_999_999_999

// marker is the body of a marker object.
type marker struct {
	// State is one of the state constants.
	State string `json:"state"`
	// Attempt counts deliveries of the row up to this generation.
	Attempt int `json:"attempt"`
	// Expires is the lease's end in Unix milliseconds (leased only).
	Expires int64 `json:"expires,omitempty"`
	// Reason says why a row was dead-lettered, or, on the lease of a
	// claim that is to bury it (and on its release), why it is dead.
	Reason string `json:"reason,omitempty"`
}

func (m marker) encode() []byte {
	b, _ := json.Marshal(m) // a struct of strings and ints always encodes
	return b
}

func decodeMarker(b []byte) (marker, error) {
	var m marker
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode lease marker: %w", err)
	}
	switch m.State {
	case stateLeased, stateReleased, stateDone, stateDead:
		return m, nil
	}
	return m, fmt.Errorf("lease marker has unknown state %q", m.State)
}

// Limits of object keys that marker keys must respect: S3 (and GCS,
// Azure) take keys of at most 1024 bytes, and file-backed servers
// (versitygw's posix backend, MinIO on a file system) path segments of
// at most 255 (NAME_MAX). A pending object's name can be within both
// while its marker key, 11 bytes longer, is not.
const (
	maxKeyBytes     = 1024
	maxSegmentBytes = 255
)

// hashedTag starts the marker name of a row whose name cannot be in its
// marker keys: hashedTag + the hex SHA-256 of the name.
const hashedTag = "#sha256:"

// markerName returns the name under which the markers of row name are
// kept: the name itself, unless a marker key holding it would be too
// long for the bucket (see maxKeyBytes), in which case it is hashedTag
// and the hex SHA-256 of the name, a fixed 72 bytes. A claim maps its
// candidates to marker names, so markers never need mapping back. A row
// whose own name has the hashed form is hashed too, so that no name's
// markers can be taken for another's.
func markerName(leasePrefix, name string) string {
	key := leasePrefix + name + "#" + strings.Repeat("0", genDigits)
	seg := key[strings.LastIndexByte(key, '/')+1:]
	if len(key) <= maxKeyBytes && len(seg) <= maxSegmentBytes && !isHashedName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return hashedTag + hex.EncodeToString(sum[:])
}

// isHashedName reports whether s has the form of a hashed marker name.
func isHashedName(s string) bool {
	h, ok := strings.CutPrefix(s, hashedTag)
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// markerKey returns the key of row name's marker of generation gen.
func markerKey(leasePrefix, name string, gen int64) string {
	return leasePrefix + markerName(leasePrefix, name) + "#" + fmt.Sprintf("%0*d", genDigits, gen)
}

// parseMarkerKey splits a key listed under leasePrefix into the marker
// name (see markerName) and the generation; ok is false for keys that are
// not markers.
func parseMarkerKey(leasePrefix, key string) (name string, gen int64, ok bool) {
	rel, found := strings.CutPrefix(key, leasePrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rel, '#')
	if i <= 0 || len(rel)-i-1 != genDigits {
		return "", 0, false
	}
	digits := rel[i+1:]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	gen, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || gen < 1 {
		return "", 0, false
	}
	return rel[:i], gen, true
}

// errBadToken reports a lease token this driver did not issue.
var errBadToken = errors.New("lease token is not an s3prefix generation")

// token formats a generation as a lease token.
func token(gen int64) string { return strconv.FormatInt(gen, 10) }

func parseToken(tok string) (int64, error) {
	gen, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || gen < 1 || gen >= maxGen {
		return 0, fmt.Errorf("%w: %q", errBadToken, tok)
	}
	return gen, nil
}
