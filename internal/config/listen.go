package config

import (
	"fmt"
)

// Listen resolves server.listen alone, from the same file, environment
// and overlay Load reads, without validating anything else and without
// contacting etcd. It is for `changeflow healthcheck`: an HTTP probe that
// runs in a container or a systemd unit beside the instance must not fail
// because the probe's environment lacks the database DSN or a token the
// instance itself has. server.listen is read once at startup, so an etcd
// value could not have moved the running listener anyway.
func Listen(opts Options) (string, error) {
	opts = withDefaults(opts)
	m := &Manager{opts: opts, log: opts.Logger, b: newBuilder(instanceID(opts))}
	base, err := m.readBase(true)
	if err != nil {
		return "", fmt.Errorf("read configuration: %w", err)
	}
	mg, err := merge(base.defaults, base.file, base.env, base.overlay)
	if err != nil {
		return "", fmt.Errorf("read configuration: %w", err)
	}
	for i := range m.b.items {
		it := &m.b.items[i]
		if it.key != KeyServerListen {
			continue
		}
		res := it.resolve(it, rawOf(mg, it.key), map[string]any{})
		if res.err != nil {
			return "", res.err
		}
		s, _ := res.val.(string)
		return s, nil
	}
	return "", fmt.Errorf("%w: %s is not a known item", ErrInvalid, KeyServerListen)
}
