// Alamofire's module re-exports Foundation: code written against it uses
// `NotificationCenter`, `URL` and `Date` with `import Alamofire` alone. So does this
// module, so that such code compiles with `import ReachabilitydClient` in its place.
@_exported import Foundation
