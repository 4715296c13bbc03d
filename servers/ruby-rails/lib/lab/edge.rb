# frozen_string_literal: true

module Lab
  # The first middleware, between Puma and Rails: what the contract asks of every response that
  # Rails would do otherwise.
  # - A path with an empty, "." or ".." segment, or a trailing "/", names no resource: 404 before
  #   routing (Rails' router would clean it and route "/hello/" to /hello).
  # - Every response has a Content-Length and a Date computed for it (Puma 5 adds neither).
  # - requests_handled: counted as the response is returned to Puma, /health excluded.
  class Edge
    JSON_TYPE = "application/json"
    TRAILING_SLASH = %r{./\z}

    def self.counter = @counter
    def self.counter=(counter)
      @counter = counter
    end

    # The contract's JSON error (also Rails' exceptions_app: a malformed URL, a bad encoding...).
    def self.error_response(status, message = nil)
      status = 500 unless status.between?(400, 599)
      message ||= status == 500 ? "internal server error" : Rack::Utils::HTTP_STATUS_CODES.fetch(status, "error").downcase
      body = JSON.generate({ error: message })
      [status, { "Content-Type" => JSON_TYPE, "Content-Length" => body.bytesize.to_s }, [body]]
    end

    def initialize(app)
      @app = app
    end

    def call(env)
      path = env["PATH_INFO"].to_s
      status, headers, body = if App::UNCLEAN_PATH.match?(path) || TRAILING_SLASH.match?(path)
                                Edge.error_response(404, "not found")
                              else
                                @app.call(env)
                              end
      whole = +""
      body.each { |part| whole << part }
      body.close if body.respond_to?(:close)
      headers["Content-Length"] = whole.bytesize.to_s
      headers["Date"] = Time.now.httpdate
      Edge.counter&.increment unless path == "/health"
      [status, headers, [whole]]
    end
  end
end
