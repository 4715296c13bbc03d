# frozen_string_literal: true

# The contract's endpoints (servers/openapi.yaml). No `.:format` suffix; an id is any one segment
# (the controller answers 400 for one that is not an id). A known path with another method is a
# 405 naming the methods it takes; any other path a 404 (Lab::Edge has already refused unclean ones).
Rails.application.routes.draw do
  segment = %r{[^/]+}
  scope format: false do
    get "/health", to: "health#show"
    get "/hello", to: "hello#show"
    get "/delay/:ms", to: "hello#delay", constraints: { ms: segment }
    post "/requests", to: "requests#create"
    get "/requests/:id", to: "requests#show", constraints: { id: segment }
    post "/metrics", to: "metrics#create"
    post "/items", to: "items#create"
    get "/items/:id", to: "items#show", constraints: { id: segment }
    get "/users/:id", to: "users#show", constraints: { id: segment }
    post "/users/:id", to: "users#update", constraints: { id: segment }
    get "/users/:id/page", to: "users#page", constraints: { id: segment }

    {
      "/health" => "GET, HEAD", "/hello" => "GET, HEAD", "/delay/:ms" => "GET, HEAD",
      "/requests" => "POST", "/requests/:id" => "GET, HEAD", "/metrics" => "POST", "/items" => "POST",
      "/items/:id" => "GET, HEAD", "/users/:id" => "GET, HEAD, POST", "/users/:id/page" => "GET, HEAD",
    }.each do |path, allow|
      match path, to: "errors#not_allowed", via: :all, defaults: { allow: allow },
                  constraints: { id: segment, ms: segment }
    end
    match "/", to: "errors#not_found", via: :all
    match "*path", to: "errors#not_found", via: :all
  end
end
