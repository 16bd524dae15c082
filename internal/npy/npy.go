// Package npy reads and writes NumPy's .npy files, the format kiln's
// command-line tool takes inputs in and writes outputs to.
//
// A .npy file is the magic string "\x93NUMPY", a major and minor version
// byte, the header's length (2 bytes little-endian in version 1, 4 bytes
// in versions 2 and 3), the header (a Python dict literal giving 'descr',
// 'fortran_order' and 'shape', padded with spaces to a 64-byte boundary
// and ended by a newline) and the raw array data.
//
// Read accepts versions 1, 2 and 3, C (row-major) order and the
// little-endian dtypes '<f4', '<f8' (rounded to float32, since Kiln has no
// float64), '<i8', '<i4', '|u1' and '|i1'. Write stores float32, int64,
// int32, uint8 and int8 tensors under their own dtype and bfloat16 tensors
// as '<f4': NumPy has no bfloat16, and widening is exact.
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/internal/shape"
)

const magic = "\x93NUMPY"

// maxHeader bounds the header a file may declare. NumPy itself refuses
// headers over 10000 bytes by default; a corrupt length must not make Read
// trust gigabytes.
const maxHeader = 1 << 20

// dtypes maps the descr strings Read accepts to the tensor dtype they load
// as and their element size.
var dtypes = map[string]struct {
	dtype autograd.DType
	size  int
}{
	"<f4": {autograd.Float32, 4},
	"<f8": {autograd.Float32, 8},
	"<i8": {autograd.Int64, 8},
	"<i4": {autograd.Int32, 4},
	"|u1": {autograd.Uint8, 1},
	"|i1": {autograd.Int8, 1},
}

// Read loads the array in the .npy file at path as a contiguous tensor.
// Errors name the file and what is wrong with it.
func Read(path string) (*autograd.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	t, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("npy: %s: %w", path, err)
	}
	return t, nil
}

// Decode parses the bytes of a .npy file.
func Decode(b []byte) (*autograd.Tensor, error) {
	t, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	return t, nil
}

func decode(b []byte) (*autograd.Tensor, error) {
	if len(b) < len(magic)+2 || string(b[:len(magic)]) != magic {
		return nil, errors.New(`not a .npy file (it does not start with "\x93NUMPY")`)
	}
	major, minor := b[6], b[7]
	rest := b[8:]
	var hlen int
	switch major {
	case 1:
		if len(rest) < 2 {
			return nil, errors.New("file ends inside the header length")
		}
		hlen, rest = int(binary.LittleEndian.Uint16(rest)), rest[2:]
	case 2, 3:
		if len(rest) < 4 {
			return nil, errors.New("file ends inside the header length")
		}
		n := binary.LittleEndian.Uint32(rest)
		if n > maxHeader {
			return nil, fmt.Errorf("header length %d is more than the %d bytes allowed", n, maxHeader)
		}
		hlen, rest = int(n), rest[4:]
	default:
		return nil, fmt.Errorf("format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > len(rest) {
		return nil, fmt.Errorf("header length %d exceeds the %d bytes left in the file (truncated?)", hlen, len(rest))
	}
	h, err := parseHeader(string(rest[:hlen]))
	if err != nil {
		return nil, fmt.Errorf("header %q: %w", strings.TrimSpace(string(rest[:hlen])), err)
	}
	data := rest[hlen:]
	kind, ok := dtypes[h.descr]
	if !ok {
		return nil, fmt.Errorf("dtype %q is not supported (want one of '<f4', '<f8', '<i8', '<i4', '|u1', '|i1')", h.descr)
	}
	if h.fortran {
		return nil, errors.New("fortran_order is True; only C-order arrays are supported (save np.ascontiguousarray(a))")
	}
	// The size is checked against the data before anything is allocated.
	need, err := shape.Bytes(h.shape, kind.size)
	if err != nil {
		return nil, fmt.Errorf("shape %v of %s is larger than can be allocated: %w", h.shape, h.descr, err)
	}
	if len(data) != need {
		if len(data) < need {
			return nil, fmt.Errorf("shape %v of %s needs %d data bytes, the file has %d (truncated?)", h.shape, h.descr, need, len(data))
		}
		return nil, fmt.Errorf("shape %v of %s needs %d data bytes, the file has %d more", h.shape, h.descr, need, len(data)-need)
	}
	t := autograd.Empty(kind.dtype, h.shape...)
	le := binary.LittleEndian
	switch v := t.Data().(type) {
	case []float32:
		if h.descr == "<f8" {
			for i := range v {
				v[i] = float32(math.Float64frombits(le.Uint64(data[8*i:])))
			}
			break
		}
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(data[4*i:]))
		}
	case []int64:
		for i := range v {
			v[i] = int64(le.Uint64(data[8*i:]))
		}
	case []int32:
		for i := range v {
			v[i] = int32(le.Uint32(data[4*i:]))
		}
	case []uint8:
		copy(v, data)
	case []int8:
		for i := range v {
			v[i] = int8(data[i])
		}
	}
	return t, nil
}

type header struct {
	descr   string
	fortran bool
	shape   []int
}

// parseHeader reads the dict literal NumPy writes, such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }. It accepts
// Python's literal syntax for the three keys (either quote, optional
// trailing commas, any spacing) and nothing else.
func parseHeader(s string) (header, error) {
	p := &parser{s: s}
	var h header
	seen := map[string]bool{}
	if err := p.expect('{'); err != nil {
		return h, err
	}
	for {
		if p.peek() == '}' {
			p.pos++
			break
		}
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if seen[key] {
			return h, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		if err := p.expect(':'); err != nil {
			return h, err
		}
		switch key {
		case "descr":
			h.descr, err = p.str()
		case "fortran_order":
			h.fortran, err = p.boolean()
		case "shape":
			h.shape, err = p.tuple()
		default:
			return h, fmt.Errorf("unexpected key %q", key)
		}
		if err != nil {
			return h, fmt.Errorf("%s: %w", key, err)
		}
		if p.peek() == ',' {
			p.pos++
		} else if p.peek() != '}' {
			return h, p.errorf("want ',' or '}'")
		}
	}
	if p.peek() != 0 {
		return h, p.errorf("unexpected text after the dict")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("missing key %q", k)
		}
	}
	return h, nil
}

type parser struct {
	s   string
	pos int
}

// peek skips white space and returns the next byte, or 0 at the end.
func (p *parser) peek() byte {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
	if p.pos == len(p.s) {
		return 0
	}
	return p.s[p.pos]
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) expect(c byte) error {
	if p.peek() != c {
		return p.errorf("want %q", c)
	}
	p.pos++
	return nil
}

// str reads a quoted string without escapes, which is all NumPy writes
// for keys and dtype descriptions.
func (p *parser) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", p.errorf("want a quoted string")
	}
	end := strings.IndexByte(p.s[p.pos+1:], q)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	v := p.s[p.pos+1 : p.pos+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", p.errorf("escapes in strings are not supported")
	}
	p.pos += end + 2
	return v, nil
}

func (p *parser) boolean() (bool, error) {
	p.peek()
	for _, w := range []struct {
		word string
		v    bool
	}{{"True", true}, {"False", false}} {
		if strings.HasPrefix(p.s[p.pos:], w.word) {
			p.pos += len(w.word)
			return w.v, nil
		}
	}
	return false, p.errorf("want True or False")
}

// tuple reads a tuple of non-negative integers: (), (3,) or (2, 3).
func (p *parser) tuple() ([]int, error) {
	if err := p.expect('('); err != nil {
		return nil, err
	}
	shape := []int{}
	for {
		c := p.peek()
		if c == ')' {
			p.pos++
			break
		}
		if c < '0' || c > '9' {
			return nil, p.errorf("want a non-negative integer or ')'")
		}
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		// NumPy 1.x wrote 3L for Python 2 longs.
		if p.pos < len(p.s) && p.s[p.pos] == 'L' {
			p.pos++
		}
		d, err := strconv.Atoi(strings.TrimSuffix(p.s[start:p.pos], "L"))
		if err != nil {
			return nil, fmt.Errorf("dimension %q: %w", p.s[start:p.pos], err)
		}
		shape = append(shape, d)
		if p.peek() == ',' {
			p.pos++
		} else if p.peek() != ')' {
			return nil, p.errorf("want ',' or ')'")
		}
	}
	return shape, nil
}

// descrOf is the descr Write stores a dtype under.
var descrOf = map[autograd.DType]string{
	autograd.Float32: "<f4", autograd.BFloat16: "<f4", autograd.Int64: "<i8",
	autograd.Int32: "<i4", autograd.Uint8: "|u1", autograd.Int8: "|i1",
}

// Write saves t to path as a version 1.0 .npy file (2.0 if the header
// needs it), in C order whatever t's memory format, bfloat16 as '<f4'. The
// file is written atomically: a reader never sees it half-written.
func Write(path string, t *autograd.Tensor) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return encode(w, t) }); err != nil {
		return fmt.Errorf("npy: writing %s: %w", path, err)
	}
	return nil
}

// Encode writes t to w as Write does.
func Encode(w io.Writer, t *autograd.Tensor) error {
	if err := encode(w, t); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

func encode(w io.Writer, t *autograd.Tensor) error {
	if t == nil {
		return errors.New("tensor is nil")
	}
	if t.Data() == nil {
		return errors.New("tensor has no data")
	}
	descr, ok := descrOf[t.DType()]
	if !ok {
		return fmt.Errorf("dtype %v cannot be written", t.DType())
	}
	t = t.Detach() // so the conversions below record nothing
	if t.DType() == autograd.BFloat16 {
		t = autograd.Cast(t, autograd.Float32)
	}
	t = t.Contiguous()
	var shape strings.Builder
	shape.WriteByte('(')
	for i, d := range t.Shape() {
		if i > 0 {
			shape.WriteString(", ")
		}
		shape.WriteString(strconv.Itoa(d))
	}
	if t.NDim() == 1 {
		shape.WriteByte(',')
	}
	shape.WriteByte(')')
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape.String())
	// Pad with spaces so the data starts on a 64-byte boundary, as NumPy
	// does, and end with a newline.
	var buf bytes.Buffer
	buf.WriteString(magic)
	lenSize := 2
	if len(h)+1+63 > math.MaxUint16 {
		lenSize = 4
	}
	pad := (64 - (len(magic)+2+lenSize+len(h)+1)%64) % 64
	h += strings.Repeat(" ", pad) + "\n"
	if lenSize == 2 {
		buf.Write([]byte{1, 0})
		buf.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(h))))
	} else {
		buf.Write([]byte{2, 0})
		buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(h))))
	}
	buf.WriteString(h)
	le := binary.LittleEndian
	var data []byte
	switch v := t.Data().(type) {
	case []float32:
		data = make([]byte, 0, 4*len(v))
		for _, x := range v {
			data = le.AppendUint32(data, math.Float32bits(x))
		}
	case []int64:
		data = make([]byte, 0, 8*len(v))
		for _, x := range v {
			data = le.AppendUint64(data, uint64(x))
		}
	case []int32:
		data = make([]byte, 0, 4*len(v))
		for _, x := range v {
			data = le.AppendUint32(data, uint32(x))
		}
	case []uint8:
		data = v
	case []int8:
		data = make([]byte, len(v))
		for i, x := range v {
			data[i] = byte(x)
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}
