#pragma once
// A request the event loop has read whole, answered by cpp-httplib on a worker thread through
// a stream of our own: it replays the bytes the loop read, then reads the socket (a body the
// handler asks for itself) within the request's deadline, and writes with a timeout for a
// client that does not read. A handler knows its connection's socket, so it can notice the
// client going away while its answer is generated.
#include <httplib.h>

#include "tools/server/connection_loop.h"

namespace strata::server {

class ConnectionServer : public httplib::Server {
public:
    ConnectionServer();
    // Answers the request at the start of job.bytes on job.fd and says what becomes of the
    // connection (job.after) and what was read beyond the request (job.bytes).
    void serve(ConnectionJob& job, bool last);
};

// The socket of the connection this thread is serving; -1 outside a request handler.
int current_connection_socket();
// Ends this thread's connection once the current response is sent: for a request whose
// body was left unread, which would otherwise be taken for the next request.
void close_after_response();
// Whether reading this thread's current request ran past its deadline (httplib then
// answers 400, which the server reports as 408).
bool request_timed_out();
// Whether the peer has closed or reset the connection (it cannot read an answer any more).
bool peer_closed(int fd);

}  // namespace strata::server
