# frozen_string_literal: true

# Seed 000's scaffold `Request` (uid:string:uniq ip method url parameters:json).
class Request < ApplicationRecord
end
