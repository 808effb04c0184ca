package driverinit

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// The CUresult codes explained below (cuda.h, CUDA 11.8); plain constants
// so that the wording builds and is tested without cgo.
const (
	errNotInitialized     = 3
	errStubLibrary        = 34
	errInsufficientDriver = 35
	errDeviceUnavailable  = 46
	errNoDevice           = 100
	errOperatingSystem    = 304
	errSystemNotReady     = 802
	errDriverMismatch     = 803
	errCompatNotSupported = 804
	errUnknown            = 999
)

// failure is a failed cuInit and what the process can see of its cause.
type failure struct {
	prog       string // the program, prefixing the message: "fsdpc-cuda"
	code       int    // the CUresult
	name, desc string // the driver's name and description of it; "" if none
	// visible is CUDA_VISIBLE_DEVICES, when set (even empty, which hides
	// every device).
	visible    string
	visibleSet bool
	kernel     kernelState
}

// kernelState is what Linux shows of the NVIDIA kernel driver: procfs
// lists a loaded module (also inside a container, which shares the host's
// kernel), and a container started without the GPUs lacks /dev/nvidiactl.
// (The device file alone proves nothing: it can outlive the module.)
type kernelState uint8

const (
	kernelUnknown   kernelState = iota // not Linux, or WSL (/dev/dxg), whose driver lives elsewhere
	kernelNotLoaded                    // no /proc/driver/nvidia/version
	kernelNoDevices                    // loaded, but no /dev/nvidiactl
	kernelLoaded
)

// probe gathers what explain needs from the process and the machine.
func probe(code int, name, desc string) failure {
	f := failure{prog: "fsdpc-cuda", code: code, name: name, desc: desc}
	if len(os.Args) > 0 && os.Args[0] != "" {
		// strings rather than path/filepath, which cu does not import
		// (see the package doc on the order of inits).
		f.prog = os.Args[0][strings.LastIndexByte(os.Args[0], '/')+1:]
	}
	f.visible, f.visibleSet = os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if runtime.GOOS == "linux" && !exists("/dev/dxg") {
		switch {
		case !exists("/proc/driver/nvidia/version"):
			f.kernel = kernelNotLoaded
		case !exists("/dev/nvidiactl"):
			f.kernel = kernelNoDevices
		default:
			f.kernel = kernelLoaded
		}
	}
	return f
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// explain is the message for the failure: a headline naming the error,
// then what it means here and what to check, one point a line.
func (f failure) explain() string {
	name := f.name
	if name == "" {
		name = "CUresult"
	}
	summary, why := "the CUDA driver failed to initialize", "Check that nvidia-smi lists the GPUs."
	byKernel := false // whether a missing kernel driver would explain it
	switch f.code {
	case errNoDevice:
		summary, why, byKernel = "no CUDA device", "", true
	case errNotInitialized, errUnknown, errOperatingSystem:
		summary, byKernel = "the CUDA driver failed to start", true
		why = "This usually means the NVIDIA kernel driver is not loaded, or is not the version of libcuda.so.1 (a driver upgraded without a reboot): check nvidia-smi, and lsmod | grep nvidia."
	case errInsufficientDriver:
		summary = "the NVIDIA driver is too old"
		why = "The NVIDIA kernel driver is older than the libcuda.so.1 this process loaded needs (a CUDA forward-compatibility libcuda, or a driver upgraded without a reboot): compare nvidia-smi's Driver Version with the libcuda.so.1 that ldd " + f.prog + " finds (LD_LIBRARY_PATH)."
	case errDriverMismatch:
		summary = "the CUDA driver and the kernel driver do not match"
		why = "libcuda.so.1 and the NVIDIA kernel module are different versions (a driver upgraded without a reboot, or a container's libcuda not from its host): check nvidia-smi; reboot, or install one driver version for both."
	case errStubLibrary:
		summary = "the libcuda.so.1 loaded is the CUDA toolkit's stub"
		why = "The stub (cuda/lib64/stubs) is only for linking: remove its directory from LD_LIBRARY_PATH so that the NVIDIA driver's libcuda.so.1 is loaded, or install the driver."
	case errSystemNotReady:
		summary = "the GPUs are not ready"
		why = "On NVSwitch machines (HGX and DGX A100, H100, H200) CUDA waits for nvidia-fabricmanager: start it (systemctl start nvidia-fabricmanager; its version must be the driver's), and see nvidia-smi -q | grep -i -A2 fabric."
	case errCompatNotSupported:
		summary = "CUDA forward compatibility is not supported on this GPU"
		why = "The libcuda.so.1 loaded is a forward-compatibility library (cuda-compat), which this GPU cannot use: load the driver's own libcuda.so.1 (take cuda-compat out of LD_LIBRARY_PATH), or hide the GPUs that cannot with CUDA_VISIBLE_DEVICES."
	case errDeviceUnavailable:
		summary = "every GPU is unavailable"
		why = "The GPUs are in exclusive-process or prohibited compute mode, and busy: see nvidia-smi (the Compute M. column and the processes)."
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: cuInit returned %s (%d)", f.prog, summary, name, f.code)
	if f.desc != "" {
		fmt.Fprintf(&b, ": %s", f.desc)
	}
	b.WriteByte('\n')
	if f.visibleSet && (f.code == errNoDevice || f.code == errCompatNotSupported) {
		fmt.Fprintf(&b, "CUDA_VISIBLE_DEVICES=%q is set: CUDA sees only the GPUs it lists (indices or UUIDs, as nvidia-smi -L prints them), and an empty or unmatched list hides them all; unset it, or list GPUs that exist.\n", f.visible)
	}
	switch {
	// The kernel driver's absence is the likeliest cause by far, and it
	// makes the others moot.
	case byKernel && f.kernel == kernelNotLoaded:
		b.WriteString("The NVIDIA kernel driver is not loaded (there is no /proc/driver/nvidia/version): install the driver, or load it (modprobe nvidia; see lsmod | grep nvidia, and dmesg), and check with nvidia-smi; or run on a GPU node.\n")
	case byKernel && f.kernel == kernelNoDevices:
		b.WriteString("The NVIDIA kernel driver is loaded but there is no /dev/nvidiactl: in a container, start it with the GPUs (docker run --gpus all); outside one, nvidia-smi run as root creates the device files.\n")
	case f.code == errNoDevice && !f.visibleSet:
		b.WriteString("The driver is loaded but finds no GPU: check that nvidia-smi lists one, and that this user may open /dev/nvidia*.\n")
	case why != "":
		b.WriteString(why + "\n")
	}
	b.WriteString("fsdpc plan, fsdpc sim and fsdpc run --backend host need no GPU.\n")
	return b.String()
}
