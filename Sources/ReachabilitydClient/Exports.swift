// Alamofire's module re-exports Foundation: code written against it uses
// `NotificationCenter`, `URL` and `Date` with `import Alamofire` alone. So does this
// module, so that such code compiles with `import ReachabilitydClient` in its place.
@_exported import Foundation
// The manager itself lives in ReachabilitydClientCore, which does not import Foundation:
// reachctl links that module alone (a static Foundation would make it 61 MB, not 21).
@_exported import ReachabilitydClientCore
