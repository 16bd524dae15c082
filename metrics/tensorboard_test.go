package metrics

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// This file's decoder reads event files from the TFRecord and protocol
// buffer specifications, on its own: it shares no code with the writer.

// event is what the decoder makes of one tensorflow.Event.
type event struct {
	wallTime    float64
	step        int64
	fileVersion string
	values      []scalar
}

type scalar struct {
	tag   string
	value float32
}

// onlyEventFile returns the path of the one file in dir, checking that it
// is named as TensorFlow names event files.
func onlyEventFile(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if m, _ := filepath.Match("events.out.tfevents.*", e.Name()); m {
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 {
		t.Fatalf("%s holds event files %v, want one", dir, names)
	}
	if !regexp.MustCompile(`^events\.out\.tfevents\.\d{10}\.[^.].*\.\d+$`).MatchString(names[0]) {
		t.Errorf("event file named %s, want events.out.tfevents.SECONDS.HOST.PID", names[0])
	}
	return filepath.Join(dir, names[0])
}

// decodeEventFile reads every record of an event file, checking its
// framing and both checksums, and decodes its events; the first must be
// the version event.
func decodeEventFile(t *testing.T, path string) []event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	table := crc32.MakeTable(0x82f63b78) // CRC-32C, reversed polynomial
	masked := func(data []byte) uint32 {
		c := crc32.Update(0, table, data)
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	var events []event
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			t.Fatalf("%s: %d bytes at offset %d, too few for a record header", path, len(b)-off, off)
		}
		header := b[off : off+8]
		n := binary.LittleEndian.Uint64(header)
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), masked(header); got != want {
			t.Fatalf("%s: record at %d: length CRC %#x, want %#x", path, off, got, want)
		}
		off += 12
		if uint64(len(b)-off) < n+4 {
			t.Fatalf("%s: record at %d: %d data bytes and a CRC do not fit in the %d left", path, off-12, n, len(b)-off)
		}
		data := b[off : off+int(n)]
		if got, want := binary.LittleEndian.Uint32(b[off+int(n):]), masked(data); got != want {
			t.Fatalf("%s: record at %d: data CRC %#x, want %#x", path, off-12, got, want)
		}
		off += int(n) + 4
		e, err := decodeEvent(data)
		if err != nil {
			t.Fatalf("%s: event %d: %v", path, len(events), err)
		}
		events = append(events, e)
	}
	if len(events) == 0 || events[0].fileVersion != "brain.Event:2" || events[0].values != nil {
		t.Fatalf("%s: first event %+v, want the version event", path, events)
	}
	return events
}

// field is one protocol buffer field: its number, wire type and value
// (varint or fixed-size bits in num, length-delimited bytes in data).
type field struct {
	num, wire int
	bits      uint64
	data      []byte
}

// fields walks a protocol buffer message.
func fields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("bad key varint")
		}
		b = b[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case 0:
			if f.bits, n = binary.Uvarint(b); n <= 0 {
				return nil, fmt.Errorf("field %d: bad varint", f.num)
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return nil, fmt.Errorf("field %d: short fixed64", f.num)
			}
			f.bits, b = binary.LittleEndian.Uint64(b), b[8:]
		case 5:
			if len(b) < 4 {
				return nil, fmt.Errorf("field %d: short fixed32", f.num)
			}
			f.bits, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, fmt.Errorf("field %d: bad length", f.num)
			}
			f.data, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return nil, fmt.Errorf("field %d: wire type %d", f.num, f.wire)
		}
		out = append(out, f)
	}
	return out, nil
}

// decodeEvent decodes an Event holding a wall time, a step, a file
// version or a summary of simple values, each field of the wire type
// event.proto gives it.
func decodeEvent(b []byte) (event, error) {
	var e event
	fs, err := fields(b)
	if err != nil {
		return e, err
	}
	for _, f := range fs {
		switch {
		case f.num == 1 && f.wire == 1: // double wall_time
			e.wallTime = math.Float64frombits(f.bits)
		case f.num == 2 && f.wire == 0: // int64 step
			e.step = int64(f.bits)
		case f.num == 3 && f.wire == 2: // string file_version
			e.fileVersion = string(f.data)
		case f.num == 5 && f.wire == 2: // Summary summary
			values, err := fields(f.data)
			if err != nil {
				return e, fmt.Errorf("summary: %v", err)
			}
			for _, v := range values {
				if v.num != 1 || v.wire != 2 { // repeated Value value
					return e, fmt.Errorf("summary: field %d of wire type %d", v.num, v.wire)
				}
				vf, err := fields(v.data)
				if err != nil {
					return e, fmt.Errorf("summary value: %v", err)
				}
				var s scalar
				for _, f := range vf {
					switch {
					case f.num == 1 && f.wire == 2: // string tag
						s.tag = string(f.data)
					case f.num == 2 && f.wire == 5: // float simple_value
						s.value = math.Float32frombits(uint32(f.bits))
					default:
						return e, fmt.Errorf("summary value: field %d of wire type %d", f.num, f.wire)
					}
				}
				e.values = append(e.values, s)
			}
		default:
			return e, fmt.Errorf("field %d of wire type %d", f.num, f.wire)
		}
	}
	return e, nil
}

func TestGoldenEvents(t *testing.T) {
	_, path := writeGolden(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "golden.tfevents", b)
}

func TestDecodeEvents(t *testing.T) {
	_, path := writeGolden(t)
	events := decodeEventFile(t, path)
	same := func(a, b float32) bool { return a == b || a != a && b != b }
	wall := float64(clock.UnixMilli()) / 1e3
	want := []event{
		{wallTime: wall, fileVersion: "brain.Event:2"},
		{wallTime: wall, step: 120, values: []scalar{{"train/loss", 2.3125}, {"train/lr", 0.1}, {"train/samples_per_s", 312.4}}},
		{wallTime: wall, step: 130, values: []scalar{{"train/loss", 1e-7}, {"train/accuracy", 0.25}, {"train/lr", 1.5e-5},
			{"train/a-b/c", 3}, {"train/grad_norm", 1e21}, {"train/zz.top", 0}}},
		{wallTime: wall + 1.5, step: 130, values: []scalar{{"eval/loss", float32(math.NaN())}, {"eval/accuracy", 0.9375},
			{"eval/auc", 0.80125}, {"eval/lr", float32(math.Inf(1))}, {"eval/x", float32(math.Inf(-1))}}},
		{wallTime: wall - 3600},
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
	}
	for i, e := range events {
		w := want[i]
		ok := e.wallTime == w.wallTime && e.step == w.step && e.fileVersion == w.fileVersion && len(e.values) == len(w.values)
		for j := range min(len(e.values), len(w.values)) {
			ok = ok && e.values[j].tag == w.values[j].tag && same(e.values[j].value, w.values[j].value)
		}
		if !ok {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
	}
}
