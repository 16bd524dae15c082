package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// eventFile is a TensorBoard event file: a TFRecord file of serialized
// tensorflow.Event protocol buffers, the first saying the file's version.
type eventFile struct {
	f     *os.File
	frame []byte
}

// fileVersion is the version the first event of an event file names.
const fileVersion = "brain.Event:2"

// createEventFile creates a new event file in dir (created if need be),
// named as TensorFlow names them, and writes its version event at now.
func createEventFile(dir string, now time.Time) (*eventFile, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	base := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d", now.Unix(), host, os.Getpid()))
	// Two Writers of one process in one second: the second file gets a
	// suffix (TensorBoard reads every file with "tfevents" in its name).
	var f *os.File
	for i := 0; ; i++ {
		name := base
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) || i == 1000 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	e := &eventFile{f: f}
	if err := e.write(appendVersionEvent(nil, float64(now.UnixMilli())/1e3)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return e, nil
}

// write appends one record holding data to the file, in one write:
// data's length (uint64, little-endian), the masked CRC-32C of those 8
// bytes, data and data's masked CRC-32C.
func (e *eventFile) write(data []byte) error {
	b := binary.LittleEndian.AppendUint64(e.frame[:0], uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(b))
	b = append(b, data...)
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(data))
	e.frame = b
	_, err := e.f.Write(b)
	return err
}

func (e *eventFile) close() error { return e.f.Close() }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum of b: its CRC-32C rotated right by 15
// bits plus a constant.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Protocol buffer wire types and the field numbers of the messages
// written (tensorflow/core/util/event.proto, framework/summary.proto).
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5

	eventWallTime    = 1 // double
	eventStep        = 2 // int64
	eventFileVersion = 3 // string
	eventSummary     = 5 // Summary
	summaryValue     = 1 // repeated Summary.Value
	valueTag         = 1 // string
	valueSimpleValue = 2 // float
)

func appendKey(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

// appendBytesKey appends the key of a length-delimited field and its
// length n.
func appendBytesKey(b []byte, field, n int) []byte {
	return binary.AppendUvarint(appendKey(b, field, wireBytes), uint64(n))
}

// bytesFieldLen is the encoded size of a length-delimited field (of a
// field number below 16) holding n bytes.
func bytesFieldLen(n int) int {
	var v [binary.MaxVarintLen64]byte
	return 1 + binary.PutUvarint(v[:], uint64(n)) + n
}

func appendWallTime(b []byte, wall float64) []byte {
	return binary.LittleEndian.AppendUint64(appendKey(b, eventWallTime, wireFixed64), math.Float64bits(wall))
}

// appendVersionEvent appends Event{wall_time, file_version}.
func appendVersionEvent(b []byte, wall float64) []byte {
	b = appendWallTime(b, wall)
	return append(appendBytesKey(b, eventFileVersion, len(fileVersion)), fileVersion...)
}

// appendScalars appends Event{wall_time, step, summary} whose summary holds
// one simple_value for each of names, tagged split/name.
func appendScalars(b []byte, wall float64, step int64, split string, names []string, values map[string]float64) []byte {
	valueLen := func(name string) int { return bytesFieldLen(len(split)+1+len(name)) + 5 }
	summaryLen := 0
	for _, name := range names {
		summaryLen += bytesFieldLen(valueLen(name))
	}
	b = appendWallTime(b, wall)
	if step != 0 { // proto3 leaves out a zero
		b = binary.AppendUvarint(appendKey(b, eventStep, wireVarint), uint64(step))
	}
	b = appendBytesKey(b, eventSummary, summaryLen)
	for _, name := range names {
		b = appendBytesKey(b, summaryValue, valueLen(name))
		b = appendBytesKey(b, valueTag, len(split)+1+len(name))
		b = append(append(append(b, split...), '/'), name...)
		b = appendKey(b, valueSimpleValue, wireFixed32)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(values[name])))
	}
	return b
}
