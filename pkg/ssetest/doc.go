// Package ssetest is a scripted Server-Sent Events server for tests, in the spirit of net/http/httptest.
//
// A Server answers its n-th connection with the n-th Handler it was given (the last one answers every
// connection after that) and records every request, so a test can check the headers a client sent on its
// first connection and on each reconnection. Handlers cover what an SSE client must survive: a status
// other than 200 (Status), a wrong content type (ContentType), a fixed script of bytes (Script), a stream
// cut in the middle of an event, slow bytes (Write with pauses) and a replayable numbered log (Log) that
// honors Last-Event-ID, which is what exactly-once tests need. Frame and IDBlock build the text of an event
// and of an id-only block for scripts.
//
// Concurrency: a Server may be used from any goroutine. Handlers run on the server's connection
// goroutines, one per request; the Stream they get must only be used on that goroutine. Close (registered
// with t.Cleanup by New) ends every open stream and waits for the handlers to return.
package ssetest
