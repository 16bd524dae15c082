package criteo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// The shape of a Kaggle line.
const (
	NumDense  = 13                       // integer features I1..I13
	NumSparse = 26                       // categorical features C1..C26
	NumFields = 1 + NumDense + NumSparse // label, I1..I13, C1..C26
	maxHexLen = 8                        // categoricals are 32-bit hashes
)

// ErrBadLine is matched (errors.Is) by every *LineError, so a caller can
// tell bad data from I/O failures without inspecting messages.
var ErrBadLine = errors.New("bad line")

// A LineError reports a line that breaks the Kaggle format. File and Line
// (1-based) locate it; Field is "label", "I1".."I13", "C1".."C26", or
// "count" when the line does not have 40 fields; Err is the cause (a
// *strconv.NumError for a non-integer, for instance).
type LineError struct {
	File  string
	Line  int
	Field string
	Err   error
}

// Error formats as FILE:LINE: field F: cause, leaving out LINE when it is
// unknown (0: a line re-read by Batches, which keeps offsets, not numbers).
func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: field %s: %v", e.File, e.Field, e.Err)
	}
	return fmt.Sprintf("%s:%d: field %s: %v", e.File, e.Line, e.Field, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrBadLine) true for every *LineError.
func (e *LineError) Is(target error) bool { return target == ErrBadLine }

// A Sample is one parsed line before the dictionary lookup: Sparse holds
// the raw categorical values (after the modulo of the max index range).
type Sample struct {
	Label  float32
	Dense  [NumDense]float32
	Sparse [NumSparse]uint32
}

// fieldNames[i] names field i of a line in errors.
var fieldNames = func() (n [NumFields]string) {
	n[0] = "label"
	for i := range NumDense {
		n[1+i] = "I" + strconv.Itoa(i+1)
	}
	for i := range NumSparse {
		n[1+NumDense+i] = "C" + strconv.Itoa(i+1)
	}
	return n
}()

// ParseLine parses one line (with or without its trailing newline) into s.
// maxIndRange, when positive, reduces each categorical modulo it, as
// dlrm's --max-ind-range does before building its dictionaries. A bad
// line returns a *LineError with File and Line left zero for the caller
// to fill in (Scan and Index.Batches do).
func ParseLine(line []byte, maxIndRange int, s *Sample) error {
	line = trimEOL(line)
	if n := bytes.Count(line, tab) + 1; n != NumFields {
		return &LineError{Field: "count", Err: fmt.Errorf("%d fields, want %d", n, NumFields)}
	}
	for i := range NumFields {
		f := line
		if j := bytes.IndexByte(line, '\t'); j >= 0 {
			f, line = line[:j], line[j+1:]
		}
		var err error
		switch {
		case i == 0:
			switch string(f) {
			case "0": // dlrm would read an empty label as 0; here it is bad
				s.Label = 0
			case "1":
				s.Label = 1
			default:
				err = fmt.Errorf("label %q, want 0 or 1", f)
			}
		case i <= NumDense:
			s.Dense[i-1], err = parseDense(f)
		default:
			s.Sparse[i-1-NumDense], err = parseHex(f, maxIndRange)
		}
		if err != nil {
			return &LineError{Field: fieldNames[i], Err: err}
		}
	}
	return nil
}

var tab = []byte{'\t'}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// parseDense turns an integer field into dlrm's dense input. dlrm reads
// the field as int32 (so values outside int32 are errors here as there),
// clips negatives to 0, converts to float32 and computes np.log(x + 1) in
// float32. Here x+1 is rounded to float32 as NumPy does, and the log is
// computed in float64 and rounded once to float32, which is the correctly
// rounded float32 log; NumPy's float32 log agrees to within an ulp.
func parseDense(f []byte) (float32, error) {
	if len(f) == 0 {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(f), 10, 32)
	if err != nil {
		return 0, err
	}
	return denseInput(v), nil
}

// denseInput is dlrm's transform of one integer feature, shared with the
// planted generator so its in-memory batches equal what Scan reads back.
func denseInput(v int64) float32 {
	return float32(math.Log(float64(float32(max(v, 0)) + 1)))
}

// parseHex parses a categorical: empty is 0, otherwise 1 to 8 hex digits.
// dlrm's int(x, 16) is laxer (signs, "0x", underscores, any length), but
// Kaggle's categoricals are all 8-digit 32-bit hashes, so anything else
// is a corrupt line.
func parseHex(f []byte, maxIndRange int) (uint32, error) {
	if len(f) == 0 {
		return 0, nil
	}
	if len(f) > maxHexLen {
		return 0, fmt.Errorf("%q has %d hex digits, at most %d allowed", f, len(f), maxHexLen)
	}
	var v uint32
	for _, c := range f {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("%q is not hexadecimal", f)
		}
		v = v<<4 | uint32(d)
	}
	if maxIndRange > 0 {
		v = uint32(uint64(v) % uint64(maxIndRange))
	}
	return v, nil
}
