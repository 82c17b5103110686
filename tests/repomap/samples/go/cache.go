package kv

// Cached wraps a Getter and remembers answers.
type Cached struct {
	inner Getter
	seen  map[string]string
}

func NewCached(inner Getter) *Cached {
	return &Cached{inner: inner, seen: map[string]string{}}
}

func (c *Cached) Get(key string) (string, error) {
	if v, ok := c.seen[key]; ok {
		return v, nil
	}
	v, err := c.inner.Get(key)
	if err == nil {
		c.seen[key] = v
	}
	return v, err
}

func Example() string {
	s := NewStore()
	s.Put("a", "b")
	v, _ := NewCached(s).Get("a")
	return v
}
