// Package tlstest makes throw-away PKIs for tests: a CA in a temporary
// directory and certificates for any identity, written as the files a daemon's
// tls section names.
package tlstest
