#pragma once
// The connections of the API server: cpp-httplib's server with each connection's socket read
// through a stream of our own, so that (1) a request must arrive whole within the read
// timeout, not only byte by byte (a client sending a byte a second would otherwise hold a
// connection thread for hours), and (2) a handler knows its connection's socket and can
// notice the client going away while its answer is generated.
#include <httplib.h>

namespace strata::server {

class ConnectionServer : public httplib::Server {
public:
    // Lengthens the queue of connections waiting to be accepted, once bound: httplib's is 5,
    // and a burst of clients overflowing it sees connections reset.
    void set_accept_backlog(int n);

private:
    bool process_and_close_socket(socket_t sock) override;
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
