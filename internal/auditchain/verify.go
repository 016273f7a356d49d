package auditchain

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// VerifyError is the first thing in an export that does not match: the
// line it is on (1-based, as an editor counts) and, for a record, its seq.
type VerifyError struct {
	Line   int
	Seq    int64
	Reason string
}

func (e *VerifyError) Error() string {
	if e.Seq != 0 {
		return fmt.Sprintf("line %d (seq %d): %s", e.Line, e.Seq, e.Reason)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// Summary is what a verified export holds.
type Summary struct {
	Format                   string
	Count, FirstSeq, LastSeq int64
	LastHash, KeyID          string
	From, To, ExportedAt     string
}

// item is one line of an export, read in either format.
type item struct {
	line     int
	manifest bool
	seq      int64
	prevHash string
	hash     string
	// fields is the record without the line's own keys, or the manifest
	// without its signature.
	fields    Fields
	signature string
}

// Verify reads an export (JSONL or CSV, told apart by its first byte)
// twice. First it finds the manifest (the last line) and checks its
// Ed25519 signature with pub: until that verifies nothing in the file can
// be trusted, and a wrong key is the likelier mistake. Then it walks the
// records and checks each one's hash against its content, seq and
// prevHash; that the first starts where the manifest says (firstSeq,
// startPrevHash), that each seq follows the one before and each prevHash
// is the hash before it; and at the end that lastSeq, count and lastHash
// describe what was read. Knowing the manifest first is what lets it name
// the record at fault even when the first record was removed. The first
// mismatch is returned as a *VerifyError.
func Verify(rs io.ReadSeeker, pub ed25519.PublicKey) (Summary, error) {
	var m *item
	format, err := readItems(rs, func(it item) error {
		if it.manifest {
			m = &it
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	if m == nil {
		return Summary{}, &VerifyError{Line: 1, Reason: "no manifest: the export is cut short (or its last line was removed)"}
	}
	c := checker{pub: pub, sum: Summary{Format: format}}
	if err := c.expect(*m); err != nil {
		return Summary{}, err
	}
	if _, err := rs.Seek(0, io.SeekStart); err != nil {
		return Summary{}, fmt.Errorf("read export again: %w", err)
	}
	if _, err := readItems(rs, c.next); err != nil {
		return Summary{}, err
	}
	if !c.done {
		return Summary{}, &VerifyError{Line: c.lastLine + 1, Reason: "no manifest after the last record (the export is cut short)"}
	}
	return c.sum, nil
}

// readItems hands every item of the export on r to next and says which
// format it is in.
func readItems(r io.Reader, next func(item) error) (string, error) {
	br := bufio.NewReader(r)
	first, err := br.Peek(1)
	if err != nil {
		return "", &VerifyError{Line: 1, Reason: "the export is empty"}
	}
	if first[0] == '{' {
		return FormatJSONL, readJSONL(br, next)
	}
	return FormatCSV, readCSV(br, next)
}

// readJSONL hands each line to next: every line is an item (a blank one
// is an error), and the file may end with a newline or without.
func readJSONL(br *bufio.Reader, next func(item) error) error {
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read export: %w", err)
		}
		raw = bytes.TrimRight(raw, "\r\n")
		it, perr := jsonlItem(n, raw)
		if perr != nil {
			return perr
		}
		if err := next(it); err != nil {
			return err
		}
	}
}

func jsonlItem(n int, raw []byte) (item, error) {
	f, err := parseFlat(raw)
	if err != nil {
		return item{}, &VerifyError{Line: n, Reason: err.Error()}
	}
	typ, _ := f.take("type")
	switch typ {
	case "manifest":
		f["type"] = typ
		sig, _ := f.take("signature")
		return item{line: n, manifest: true, fields: f, signature: sig}, nil
	case "record":
		it := item{line: n, fields: f}
		var ok1, ok2, ok3 bool
		it.seq, ok1 = f.takeInt("seq")
		it.prevHash, ok2 = f.take("prevHash")
		it.hash, ok3 = f.take("hash")
		if !ok1 || !ok2 || !ok3 {
			return item{}, &VerifyError{Line: n, Seq: it.seq, Reason: "a record needs an integer seq and string prevHash and hash"}
		}
		return it, nil
	}
	return item{}, &VerifyError{Line: n, Reason: fmt.Sprintf("type %q is neither record nor manifest", typ)}
}

// readCSV checks the header and hands each row to next.
func readCSV(br *bufio.Reader, next func(item) error) error {
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = len(csvHeader)
	head, err := cr.Read()
	if err != nil || !slices.Equal(head, csvHeader) {
		return &VerifyError{Line: 1, Reason: "neither a JSONL export nor a CSV export with the expected header"}
	}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return &VerifyError{Line: line, Reason: err.Error()}
		}
		it, perr := csvItem(line, row)
		if perr != nil {
			return perr
		}
		if err := next(it); err != nil {
			return err
		}
	}
}

func csvItem(line int, row []string) (item, error) {
	f, err := parseFlat([]byte(row[len(row)-1]))
	if err != nil {
		return item{}, &VerifyError{Line: line, Reason: "record column: " + err.Error()}
	}
	switch row[0] {
	case "manifest":
		sig, _ := f.take("signature")
		return item{line: line, manifest: true, fields: f, signature: sig}, nil
	case "record":
	default:
		return item{}, &VerifyError{Line: line, Reason: fmt.Sprintf("type %q is neither record nor manifest", row[0])}
	}
	seq, err := strconv.ParseInt(row[1], 10, 64)
	if err != nil {
		return item{}, &VerifyError{Line: line, Reason: "seq is not an integer"}
	}
	it := item{line: line, seq: seq, prevHash: row[2], hash: row[3], fields: f}
	// The repeated columns are what a reader of the spreadsheet sees: they
	// must say what the hashed record says.
	for i := csvViewFirst; i < len(csvHeader)-1; i++ {
		if row[i] != fieldText(f[csvHeader[i]]) {
			return item{}, &VerifyError{Line: line, Seq: seq, Reason: fmt.Sprintf("column %s does not match the record", csvHeader[i])}
		}
	}
	return it, nil
}

// checker follows the chain through an export's items.
type checker struct {
	pub      ed25519.PublicKey
	sum      Summary
	started  bool
	prevSeq  int64
	prevHash string
	done     bool
	lastLine int
	// want is what the manifest, verified first, says the records are.
	want struct {
		firstSeq, lastSeq, count int64
		startPrevHash, lastHash  string
		line                     int
	}
}

func (c *checker) next(it item) error {
	c.lastLine = it.line
	if c.done {
		return &VerifyError{Line: it.line, Seq: it.seq, Reason: "a line after the manifest"}
	}
	if it.manifest {
		return c.manifest(it)
	}
	return c.record(it)
}

func (c *checker) record(it item) error {
	bad := func(format string, args ...any) error {
		return &VerifyError{Line: it.line, Seq: it.seq, Reason: fmt.Sprintf(format, args...)}
	}
	for _, k := range lineKeys {
		if _, ok := it.fields[k]; ok {
			return bad("the record holds the reserved key %q", k)
		}
	}
	canon, err := Canonical(it.fields)
	if err != nil {
		return bad("%v", err)
	}
	if got := Hash(it.prevHash, it.seq, canon); got != it.hash {
		return bad("hash does not match the record's content, seq and prevHash (the line was changed)")
	}
	if c.started {
		if it.seq != c.prevSeq+1 {
			return bad("expected seq %d after seq %d (a record was removed or moved)", c.prevSeq+1, c.prevSeq)
		}
		if it.prevHash != c.prevHash {
			return bad("prevHash is not the hash of seq %d (a record was removed or moved)", c.prevSeq)
		}
	} else {
		if it.seq != c.want.firstSeq {
			return bad("the manifest says the export starts at seq %d (a record was removed or moved)", c.want.firstSeq)
		}
		if it.prevHash != c.want.startPrevHash {
			return bad("prevHash is not the manifest's startPrevHash")
		}
		c.started, c.sum.FirstSeq = true, it.seq
	}
	c.prevSeq, c.prevHash = it.seq, it.hash
	c.sum.Count++
	c.sum.LastSeq, c.sum.LastHash = it.seq, it.hash
	return nil
}

// expect verifies the manifest's signature and keeps what it says.
func (c *checker) expect(it item) error {
	f := it.fields
	if err := verifySignature(f, it.signature, c.pub); err != nil {
		return &VerifyError{Line: it.line, Reason: "manifest: " + err.Error()}
	}
	w := &c.want
	w.line = it.line
	w.count, _ = f["count"].(int64)
	w.firstSeq, _ = f["firstSeq"].(int64)
	w.lastSeq, _ = f["lastSeq"].(int64)
	w.startPrevHash, _ = f["startPrevHash"].(string)
	w.lastHash, _ = f["lastHash"].(string)
	c.sum.KeyID, _ = f["keyId"].(string)
	c.sum.From, _ = f["from"].(string)
	c.sum.To, _ = f["to"].(string)
	c.sum.ExportedAt, _ = f["exportedAt"].(string)
	return nil
}

// manifest checks the records read against the verified manifest.
func (c *checker) manifest(it item) error {
	bad := func(format string, args ...any) error {
		return &VerifyError{Line: it.line, Reason: "manifest: " + fmt.Sprintf(format, args...)}
	}
	w := c.want
	switch {
	case it.line != w.line:
		return bad("a second manifest")
	case w.lastSeq != c.sum.LastSeq:
		return bad("lastSeq is %d, but the last record is seq %d (records at the end were removed)", w.lastSeq, c.sum.LastSeq)
	case w.count != c.sum.Count:
		return bad("count is %d, but %d records were read", w.count, c.sum.Count)
	case w.lastHash != c.sum.LastHash:
		return bad("lastHash does not match the last record's hash")
	}
	c.done = true
	return nil
}
