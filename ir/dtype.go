package ir

import "fmt"

// DType is a tensor element type.
type DType uint8

const (
	DTypeInvalid DType = iota
	FP64
	FP32
	BF16
	FP16
	FP8E4M3
	FP8E5M2
	INT64
	INT32
	INT8
	UINT8
	BOOL
)

var dtypeInfo = [...]struct {
	name  string
	size  int64
	float bool
}{
	DTypeInvalid: {"invalid", 0, false},
	FP64:         {"fp64", 8, true},
	FP32:         {"fp32", 4, true},
	BF16:         {"bf16", 2, true},
	FP16:         {"fp16", 2, true},
	FP8E4M3:      {"fp8_e4m3", 1, true},
	FP8E5M2:      {"fp8_e5m2", 1, true},
	INT64:        {"int64", 8, false},
	INT32:        {"int32", 4, false},
	INT8:         {"int8", 1, false},
	UINT8:        {"uint8", 1, false},
	BOOL:         {"bool", 1, false},
}

// dtypeAliases maps every accepted spelling to its DType. PyTorch names
// (float32, bfloat16) are accepted next to the short ones.
var dtypeAliases = map[string]DType{
	"fp64": FP64, "float64": FP64, "double": FP64,
	"fp32": FP32, "float32": FP32, "float": FP32,
	"bf16": BF16, "bfloat16": BF16,
	"fp16": FP16, "float16": FP16, "half": FP16,
	"fp8_e4m3": FP8E4M3, "float8_e4m3fn": FP8E4M3,
	"fp8_e5m2": FP8E5M2, "float8_e5m2": FP8E5M2,
	"int64": INT64, "long": INT64,
	"int32": INT32, "int": INT32,
	"int8":  INT8,
	"uint8": UINT8,
	"bool":  BOOL,
}

func (t DType) String() string {
	if int(t) < len(dtypeInfo) {
		return dtypeInfo[t].name
	}
	return fmt.Sprintf("dtype(%d)", uint8(t))
}

// Size is the element size in bytes.
func (t DType) Size() int64 {
	if int(t) < len(dtypeInfo) {
		return dtypeInfo[t].size
	}
	return 0
}

// IsFloat reports whether mixed-precision casts apply to the type.
func (t DType) IsFloat() bool { return int(t) < len(dtypeInfo) && dtypeInfo[t].float }

// ParseDType accepts the canonical names and PyTorch's spellings.
func ParseDType(s string) (DType, bool) {
	t, ok := dtypeAliases[s]
	return t, ok
}

// DTypeNames lists the canonical names, for error messages.
func DTypeNames() []string {
	var out []string
	for t := FP64; int(t) < len(dtypeInfo); t++ {
		out = append(out, t.String())
	}
	return out
}

// MarshalText gives JSON the dtype's name.
func (t DType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }
