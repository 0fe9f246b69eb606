/** This build's version, as package.json says (a test keeps the two equal). */
export const libraryVersion = '0.1.0'
