package driverinit

import (
	"strings"
	"testing"
)

// The wording for each cause, without cgo: the headline names the error,
// one line says what to check, and the last says what needs no GPU.
func TestExplain(t *testing.T) {
	const noGPU = "fsdpc plan, fsdpc sim and fsdpc run --backend host need no GPU.\n"
	noDevice := failure{prog: "fsdpc-cuda", code: 100, name: "CUDA_ERROR_NO_DEVICE", desc: "no CUDA-capable device is detected"}
	for _, c := range []struct {
		name string
		f    failure
		want []string // the lines, in order
	}{
		{"no device, no kernel driver", with(noDevice, func(f *failure) { f.kernel = kernelNotLoaded }), []string{
			"fsdpc-cuda: no CUDA device: cuInit returned CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected\n",
			"The NVIDIA kernel driver is not loaded (there is no /proc/driver/nvidia/version): install the driver, or load it (modprobe nvidia; see lsmod | grep nvidia, and dmesg), and check with nvidia-smi; or run on a GPU node.\n",
			noGPU,
		}},
		{"no device, hidden", with(noDevice, func(f *failure) { f.kernel, f.visible, f.visibleSet = kernelLoaded, "-1", true }), []string{
			"fsdpc-cuda: no CUDA device: cuInit returned CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected\n",
			`CUDA_VISIBLE_DEVICES="-1" is set: CUDA sees only the GPUs it lists (indices or UUIDs, as nvidia-smi -L prints them), and an empty or unmatched list hides them all; unset it, or list GPUs that exist.` + "\n",
			noGPU,
		}},
		{"no device, hidden by an empty list, no kernel driver", with(noDevice, func(f *failure) { f.kernel, f.visibleSet = kernelNotLoaded, true }), []string{
			"fsdpc-cuda: no CUDA device: cuInit returned CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected\n",
			`CUDA_VISIBLE_DEVICES="" is set: `,
			"The NVIDIA kernel driver is not loaded",
			noGPU,
		}},
		{"no device in a container", with(noDevice, func(f *failure) { f.kernel = kernelNoDevices }), []string{
			"The NVIDIA kernel driver is loaded but there is no /dev/nvidiactl: in a container, start it with the GPUs (docker run --gpus all)",
			noGPU,
		}},
		{"no device, driver loaded", with(noDevice, func(f *failure) { f.kernel = kernelLoaded }), []string{
			"no CUDA device: ",
			"The driver is loaded but finds no GPU: check that nvidia-smi lists one, and that this user may open /dev/nvidia*.\n",
			noGPU,
		}},
		{"not initialized", failure{prog: "fw", code: 3, name: "CUDA_ERROR_NOT_INITIALIZED", kernel: kernelLoaded}, []string{
			"fw: the CUDA driver failed to start: cuInit returned CUDA_ERROR_NOT_INITIALIZED (3)\n",
			"This usually means the NVIDIA kernel driver is not loaded, or is not the version of libcuda.so.1",
			noGPU,
		}},
		{"unknown, no kernel driver", failure{prog: "fw", code: 999, name: "CUDA_ERROR_UNKNOWN", kernel: kernelNotLoaded}, []string{
			"fw: the CUDA driver failed to start: cuInit returned CUDA_ERROR_UNKNOWN (999)\n",
			"The NVIDIA kernel driver is not loaded",
		}},
		{"insufficient driver", failure{prog: "fsdpc-cuda", code: 35, name: "CUDA_ERROR_INSUFFICIENT_DRIVER", desc: "CUDA driver version is insufficient for CUDA runtime version", kernel: kernelLoaded}, []string{
			"fsdpc-cuda: the NVIDIA driver is too old: cuInit returned CUDA_ERROR_INSUFFICIENT_DRIVER (35): CUDA driver version is insufficient for CUDA runtime version\n",
			"The NVIDIA kernel driver is older than the libcuda.so.1 this process loaded needs",
			"ldd fsdpc-cuda finds",
		}},
		{"stub", failure{prog: "fsdpc-cuda", code: 34, name: "CUDA_ERROR_STUB_LIBRARY"}, []string{"the libcuda.so.1 loaded is the CUDA toolkit's stub", "LD_LIBRARY_PATH"}},
		{"fabric manager", failure{prog: "fsdpc-cuda", code: 802, name: "CUDA_ERROR_SYSTEM_NOT_READY"}, []string{"the GPUs are not ready", "nvidia-fabricmanager"}},
		{"mismatch", failure{prog: "fsdpc-cuda", code: 803, name: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"}, []string{"do not match", "different versions"}},
		{"no name", failure{prog: "fsdpc-cuda", code: 12345}, []string{
			"fsdpc-cuda: the CUDA driver failed to initialize: cuInit returned CUresult (12345)\n",
			"Check that nvidia-smi lists the GPUs.\n",
			noGPU,
		}},
	} {
		got := c.f.explain()
		rest := got
		for _, w := range c.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: lacks %q (in order):\n%s", c.name, w, got)
				break
			}
			rest = rest[i+len(w):]
		}
		if !strings.HasSuffix(got, noGPU) {
			t.Errorf("%s: does not end with %q:\n%s", c.name, noGPU, got)
		}
	}
}

func with(f failure, edit func(*failure)) failure {
	edit(&f)
	return f
}
