package auditchain

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// Export formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// Entry is one chained record as stored: its place, its links and its
// canonical JSON (Record, the exact bytes Hash covered).
type Entry struct {
	Seq            int64
	PrevHash, Hash string
	Record         []byte
}

// lineKeys are the keys a JSONL line adds to its record; a record never
// uses them (Canonical's callers build records without them).
var lineKeys = [...]string{"type", "seq", "prevHash", "hash"}

// csvHeader is the CSV export's header. The record column holds the
// canonical JSON that was hashed; the columns before it repeat some of its
// fields for a spreadsheet, and the verifier checks that they agree with
// it. A manifest row has type "manifest" and its line in the record
// column.
var csvHeader = []string{"type", "seq", "prevHash", "hash", "occurredAt", "source", "sourceId", "kind",
	"actor", "subject", "targetKey", "operationId", "record"}

// csvViewFirst is the index of the first repeated field in csvHeader.
const csvViewFirst = 4

// Writer writes one export: records in seq order, then the manifest.
type Writer interface {
	Record(e Entry) error
	Manifest(m Manifest) error
}

// NewWriter returns the writer of format (FormatJSONL or FormatCSV) on w.
func NewWriter(w io.Writer, format string) (Writer, error) {
	switch format {
	case FormatJSONL:
		return &jsonlWriter{w: w}, nil
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(csvHeader); err != nil {
			return nil, fmt.Errorf("export header: %w", err)
		}
		return &csvWriter{w: cw}, nil
	}
	return nil, fmt.Errorf("export: unknown format %q (jsonl or csv)", format)
}

// jsonlWriter writes one JSON object per line: the record's own fields
// with type, seq, prevHash and hash in front.
type jsonlWriter struct {
	w   io.Writer
	buf bytes.Buffer
}

func (j *jsonlWriter) Record(e Entry) error {
	if len(e.Record) < 2 || e.Record[0] != '{' {
		return fmt.Errorf("export seq %d: stored record is not a JSON object", e.Seq)
	}
	j.buf.Reset()
	j.buf.WriteString(`{"type":"record","seq":`)
	j.buf.WriteString(strconv.FormatInt(e.Seq, 10))
	j.buf.WriteString(`,"prevHash":"` + e.PrevHash + `","hash":"` + e.Hash + `"`)
	if rest := e.Record[1:]; len(rest) > 1 { // not "{}"
		j.buf.WriteByte(',')
		j.buf.Write(rest)
	} else {
		j.buf.WriteByte('}')
	}
	j.buf.WriteByte('\n')
	_, err := j.w.Write(j.buf.Bytes())
	return err
}

func (j *jsonlWriter) Manifest(m Manifest) error {
	line, err := m.Line()
	if err != nil {
		return err
	}
	_, err = j.w.Write(append(line, '\n'))
	return err
}

// csvWriter writes the header, one row per record and the manifest row.
type csvWriter struct{ w *csv.Writer }

func (c *csvWriter) Record(e Entry) error {
	f, err := parseFlat(e.Record)
	if err != nil {
		return fmt.Errorf("export seq %d: %w", e.Seq, err)
	}
	row := []string{"record", strconv.FormatInt(e.Seq, 10), e.PrevHash, e.Hash}
	for _, k := range csvHeader[csvViewFirst : len(csvHeader)-1] {
		row = append(row, fieldText(f[k]))
	}
	row = append(row, string(e.Record))
	if err := c.w.Write(row); err != nil {
		return err
	}
	// Flushed per row: the export streams (a large range is never held in
	// the writer), at the cost of one write per record.
	c.w.Flush()
	return c.w.Error()
}

func (c *csvWriter) Manifest(m Manifest) error {
	line, err := m.Line()
	if err != nil {
		return err
	}
	row := make([]string, len(csvHeader))
	row[0], row[len(row)-1] = "manifest", string(line)
	if err := c.w.Write(row); err != nil {
		return err
	}
	c.w.Flush()
	return c.w.Error()
}

// fieldText is a record value as a CSV cell ("" when absent).
func fieldText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}
