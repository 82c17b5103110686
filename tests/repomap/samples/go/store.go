package kv

import "errors"

// ErrMissing is returned when a key is absent.
var ErrMissing = errors.New("missing key")

const DefaultCapacity = 16

// Store is an in-memory key-value store.
type Store struct {
	data map[string]string
}

type Getter interface {
	Get(key string) (string, error)
}

func NewStore() *Store {
	return &Store{data: make(map[string]string, DefaultCapacity)}
}

func (s *Store) Get(key string) (string, error) {
	v, ok := s.data[key]
	if !ok {
		return "", ErrMissing
	}
	return v, nil
}

func (s *Store) Put(key, value string) {
	s.data[key] = value
}
