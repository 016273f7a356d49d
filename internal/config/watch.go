package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ErrWatching is returned by a second call to Watch.
var ErrWatching = errors.New("config: Watch already called")

// Watch starts hot reload and returns once it runs: fsnotify on the
// file's directory and, when configured, an etcd watch on the prefix. Both
// feed one debounced reload, so a burst of events is read once. It stops
// when ctx is done or Close is called. Call it once.
//
// The directory is watched, not the file, because editors replace files by
// rename and Kubernetes ConfigMaps swap a "..data" symlink: a watch on the
// old inode would go silent after the first such update.
func (m *Manager) Watch(ctx context.Context) error {
	if !m.watching.CompareAndSwap(false, true) {
		return ErrWatching
	}
	ctx, cancel := context.WithCancel(ctx)
	m.stopMu.Lock()
	m.stop = cancel
	m.stopMu.Unlock()

	var w *fsnotify.Watcher
	if m.opts.File != "" {
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			cancel()
			return fmt.Errorf("watch configuration: %w", err)
		}
		dir := filepath.Dir(m.opts.File)
		if err := w.Add(dir); err != nil {
			_ = w.Close()
			cancel()
			return fmt.Errorf("watch configuration directory %s: %w", dir, err)
		}
	}
	m.wg.Add(1)
	go m.reloadLoop(ctx)
	if w != nil {
		m.wg.Add(1)
		go m.fileLoop(ctx, w)
	}
	if m.etcd != nil {
		m.wg.Add(1)
		go m.etcdLoop(ctx)
	}
	return nil
}

// kick asks for a reload; bursts collapse because the channel holds one.
func (m *Manager) kick() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// reloadLoop reloads Debounce after the last kick. Reload logs its own
// failures and keeps the last good snapshot, so the error is not needed
// here.
func (m *Manager) reloadLoop(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.trigger:
			t.Reset(m.opts.Debounce)
		case <-t.C:
			_ = m.Reload(ctx)
		}
	}
}

// fileLoop turns directory events that concern the configuration file into
// kicks: the file's own name (write, create, rename-replace) and
// Kubernetes' "..data" swap. Other files in the directory are ignored, so a
// busy directory does not cause re-reads.
func (m *Manager) fileLoop(ctx context.Context, w *fsnotify.Watcher) {
	defer m.wg.Done()
	defer w.Close()
	name := filepath.Base(m.opts.File)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if base := filepath.Base(ev.Name); base == name || strings.HasPrefix(base, "..") {
				m.kick()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			m.log.Warn("config: file watch error", "file", m.opts.File, "err", err)
		}
	}
}
