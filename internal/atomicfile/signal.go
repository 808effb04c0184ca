package atomicfile

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// While a Write is under way its temporary file exists next to the
// output. Ctrl-C or a TERM then would leave it behind (".plan.bin.tmp123"),
// so for the length of every Write the package catches SIGINT and SIGTERM:
// on one it removes the temporary files of the writes in progress and
// exits 128 + the signal's number (130, 143), the status a shell reports
// for a process the signal killed. Outside a Write nothing is caught, so a
// program's own signal handling (the CUDA launcher's teardown) is
// untouched.

// caught are the signals a Write cleans up after.
var caught = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

var temps struct {
	sync.Mutex
	names  map[string]bool
	active int // Writes in progress
	sigs   chan os.Signal
	once   sync.Once
}

// createTemp creates a temporary file with create and registers it for
// removal on a signal; the signals are caught from before the file
// exists, and the registry's lock is held across the creation, so no
// signal can fall between the file appearing and its registration.
func createTemp(create func() (*os.File, error)) (*os.File, error) {
	temps.Lock()
	defer temps.Unlock()
	temps.once.Do(func() {
		temps.names = map[string]bool{}
		temps.sigs = make(chan os.Signal, 1)
		go cleanUpOnSignal()
	})
	if temps.active == 0 {
		for _, s := range caught {
			// A signal the process was started ignoring (SIGINT for a
			// background job) stays ignored: Notify would enable it.
			if !signal.Ignored(s) {
				signal.Notify(temps.sigs, s)
			}
		}
	}
	temps.active++
	f, err := create()
	if err != nil {
		release("")
		return nil, err
	}
	temps.names[f.Name()] = true
	return f, nil
}

// done ends a Write whose temporary file name was renamed or removed
// (finish runs under the lock, so a signal sees the file or its result,
// never a half-done rename).
func done(name string, finish func() error) error {
	temps.Lock()
	defer temps.Unlock()
	err := finish()
	release(name)
	return err
}

// release forgets name and, after the last Write, stops catching signals.
// The caller holds the lock.
func release(name string) {
	delete(temps.names, name)
	if temps.active--; temps.active == 0 {
		signal.Stop(temps.sigs)
	}
}

// cleanUpOnSignal removes every registered temporary file on a caught
// signal and exits as the signal would have ended the process. It keeps
// the lock: no Write starts or renames after the cleanup. (A signal
// caught just as the last Write ended finds nothing to remove, and still
// stops the process, as the user asked.)
func cleanUpOnSignal() {
	for sig := range temps.sigs {
		temps.Lock()
		for name := range temps.names {
			os.Remove(name)
		}
		os.Exit(128 + int(sig.(syscall.Signal)))
	}
}
