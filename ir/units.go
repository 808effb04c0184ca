package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Quantities with units: "80GiB", "450GB/s", "400Gb/s", "989TFLOPS".
// Decimal prefixes are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers
// of 1024; a lower-case b means bits.

var decimalPrefix = map[string]float64{"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
var binaryPrefix = map[string]float64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50}

// splitQuantity splits "450 GB/s" into 450 and "GB/s".
func splitQuantity(s string) (float64, string, error) {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' || s[end] == '_' ||
		(s[end] == 'e' || s[end] == 'E') && end+1 < len(s) && (s[end+1] >= '0' && s[end+1] <= '9' || s[end+1] == '-' || s[end+1] == '+') ||
		(s[end] == '-' || s[end] == '+') && end > 0 && (s[end-1] == 'e' || s[end-1] == 'E')) {
		end++
	}
	if end == 0 {
		return 0, "", fmt.Errorf("%q does not start with a number", s)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s[:end], "_", ""), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, "", fmt.Errorf("%q is not a number", s[:end])
	}
	return v, strings.TrimSpace(s[end:]), nil
}

// prefixed splits a unit into its multiplier and base unit, trying binary
// prefixes first so "GiB" is not read as "G" + "iB".
func prefixed(unit string, bases ...string) (float64, string, bool) {
	for _, base := range bases {
		if !strings.HasSuffix(unit, base) {
			continue
		}
		p := strings.TrimSuffix(unit, base)
		if m, ok := binaryPrefix[p]; ok {
			return m, base, true
		}
		if m, ok := decimalPrefix[p]; ok {
			return m, base, true
		}
	}
	return 0, "", false
}

// ParseBytes reads a size: "80GiB", "1.5 TB", "512MiB", "1024" (bytes).
func ParseBytes(s string) (int64, error) {
	v, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%v; write a size such as \"80GiB\"", err)
	}
	mult := 1.0
	if unit != "" {
		m, base, ok := prefixed(unit, "B", "b")
		if !ok {
			return 0, fmt.Errorf("%q is not a size: unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, unit)
		}
		if base == "b" {
			return 0, fmt.Errorf("size %q is in bits; write bytes (B)", s)
		}
		mult = m
	}
	b := v * mult
	if b < 0 || b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(math.Round(b)), nil
}

// ParseBandwidth reads a rate in bytes per second: "450GB/s", "400Gb/s"
// (bits), "400Gbps", "3.35TB/s".
func ParseBandwidth(s string) (float64, error) {
	v, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%v; write a bandwidth such as \"450GB/s\"", err)
	}
	if strings.HasSuffix(unit, "bps") {
		unit = strings.TrimSuffix(unit, "ps") + "/s"
	}
	if !strings.HasSuffix(unit, "/s") {
		return 0, fmt.Errorf("bandwidth %q needs a unit per second (GB/s, Gb/s, Gbps)", s)
	}
	m, base, ok := prefixed(strings.TrimSuffix(unit, "/s"), "B", "b")
	if !ok {
		return 0, fmt.Errorf("%q is not a bandwidth: unknown unit %q (use GB/s, Gb/s, Gbps)", s, unit)
	}
	if base == "b" {
		m /= 8
	}
	return v * m, nil
}

// ParseFLOPS reads a rate in FLOP/s: "989TFLOPS", "989 TFLOP/s".
func ParseFLOPS(s string) (float64, error) {
	v, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%v; write a rate such as \"989TFLOPS\"", err)
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "/s"), "S")
	m, _, ok := prefixed(unit, "FLOP")
	if !ok {
		return 0, fmt.Errorf("unknown rate unit in %q (use TFLOPS or TFLOP/s)", s)
	}
	return v * m, nil
}

// ParseFLOP reads an amount of work: "2.5TFLOP", "1e12", "3GFLOP".
func ParseFLOP(s string) (float64, error) {
	v, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%v; write an amount of work such as \"2.5TFLOP\"", err)
	}
	if unit == "" {
		return v, nil
	}
	m, _, ok := prefixed(unit, "FLOP", "FLOPs")
	if !ok {
		return 0, fmt.Errorf("unknown work unit in %q (use FLOP, GFLOP, TFLOP)", s)
	}
	return v * m, nil
}

// satAdd adds non-negative sizes, saturating instead of wrapping.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

func itoa(n int) string { return strconv.Itoa(n) }

// FormatCount prints an integer with a comma between each group of three
// digits: "8,030,261,248", "-1,024". It is fsdpc's one such formatter
// (plan text, inspect, the executor's report).
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	b.WriteString(s[:len(s)-len(digits)])
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FormatBytes prints a size with a binary prefix: "1.88 GiB".
func FormatBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// FormatFLOP prints an amount of work with a decimal prefix: "1.23 TFLOP".
func FormatFLOP(f float64) string {
	return formatSI(f) + "FLOP"
}

func formatSI(f float64) string {
	prefixes := []string{"", "K", "M", "G", "T", "P", "E", "Z"}
	i := 0
	for math.Abs(f) >= 1000 && i < len(prefixes)-1 {
		f /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f ", f)
	}
	return fmt.Sprintf("%.2f %s", f, prefixes[i])
}
